//! Money as every view shows it: one rule, so a run's spend, an item's
//! cost and a budget read alike on one screen.

/// `$12.40`: two decimals, more when an amount is finer than a cent (to
/// millionths, as the budgets' ledger keeps it), so a float's noise
/// (`0.30000000000000004`) never shows.
#[must_use]
pub fn money(x: f64) -> String {
    let cents = (x * 100.0).round() / 100.0;
    if (cents - x).abs() < 1e-9 {
        format!("${x:.2}")
    } else if x > 0.0 && x < 0.000_000_5 {
        // Under a millionth (an embedding's 20 tokens): what it is, not
        // `$0`.
        let text = format!("{x:.10}");
        format!("${}", text.trim_end_matches('0'))
    } else {
        format!("${}", (x * 1e6).round() / 1e6)
    }
}

#[cfg(test)]
mod tests {
    use super::money;

    #[test]
    fn cents_show_two_decimals_and_finer_amounts_their_millionths() {
        assert_eq!(money(12.4), "$12.40");
        assert_eq!(money(0.1 + 0.2), "$0.30");
        assert_eq!(money(3.0), "$3.00");
        assert_eq!(money(0.0912), "$0.0912");
        assert_eq!(money(1.282_884_9), "$1.282885");
        assert_eq!(money(0.000_000_4), "$0.0000004");
        assert_eq!(money(0.000_000_02), "$0.00000002");
    }
}
