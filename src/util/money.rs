//! Money as the ledger keeps it and every view shows it: one rule, so a
//! run's spend, an item's cost and a budget read alike on one screen, in
//! `--json` and in the summary line.
//!
//! The rule: an amount is kept and shown in whole millionths of the
//! workers' unit, cut down to the millionth, never rounded up (a budget
//! is reached only once what was really spent reaches it; a run's
//! `$0.123456` is the same in its summary, its counts, the budget it drew
//! on and the dashboard). A sum takes each cost with what the costs
//! before it left below a millionth ([`Carry`]), so it is the sum's own
//! millionths. An amount under a millionth is shown as it is, not `$0`.

/// Float noise, in millionths, that is taken for a whole millionth: `0.3`
/// is 299999.99999999994 of them, and a sum of floats strays as much.
fn noise(millionths: f64) -> f64 {
    (millionths.abs() * 2.0 * f64::EPSILON).max(1e-6)
}

/// Whole millionths in `millionths`, cut down (but for a float's noise).
fn whole(millionths: f64) -> f64 {
    (millionths + noise(millionths)).floor()
}

/// An amount in whole millionths of the workers' unit: the one rounding
/// of money, everywhere.
#[must_use]
pub fn to_micros(amount: f64) -> i64 {
    // Costs are checked to 0..=MAX_COST, so this never saturates.
    whole(amount * 1e6) as i64
}

/// Millionths back to the unit.
#[must_use]
pub fn from_micros(micros: i64) -> f64 {
    micros as f64 / 1e6
}

/// Costs taken into millionths one at a time, what each leaves below a
/// millionth carried to the next, so a sum is within a millionth under
/// the costs' own, never over: ten calls at 0.0000004 (20 tokens of an
/// embedding) are 4 millionths, where each taken alone was 0, and a
/// budget they should reach was never reached.
#[derive(Debug, Default)]
pub struct Carry(std::sync::Mutex<f64>);

impl Carry {
    /// `cost` (checked to 0..=`MAX_COST`) in whole millionths, with what
    /// the costs before it carried.
    pub fn micros(&self, cost: f64) -> i64 {
        let mut carried = self.0.lock().unwrap_or_else(|p| p.into_inner());
        let exact = cost * 1e6 + *carried;
        let taken = whole(exact);
        *carried = exact - taken;
        taken as i64
    }
}

/// `$12.40`: two decimals, more when an amount is finer than a cent, to
/// the millionth by [`to_micros`] (so a float's noise, `0.30000000000000004`,
/// never shows).
#[must_use]
pub fn money(x: f64) -> String {
    let micros = to_micros(x);
    if micros == 0 && x > 0.0 {
        // Under a millionth (an embedding's 20 tokens): what it is, not
        // `$0`.
        let text = format!("{x:.10}");
        return format!("${}", text.trim_end_matches('0'));
    }
    let sign = if micros < 0 { "-" } else { "" };
    let (units, part) = (
        micros.unsigned_abs() / 1_000_000,
        micros.unsigned_abs() % 1_000_000,
    );
    if part % 10_000 == 0 {
        format!("${sign}{units}.{:02}", part / 10_000)
    } else {
        let digits = format!("{part:06}");
        format!("${sign}{units}.{}", digits.trim_end_matches('0'))
    }
}

#[cfg(test)]
mod tests {
    use super::{Carry, money, to_micros};

    #[test]
    fn cents_show_two_decimals_and_finer_amounts_their_millionths() {
        assert_eq!(money(12.4), "$12.40");
        assert_eq!(money(0.1 + 0.2), "$0.30");
        assert_eq!(money(3.0), "$3.00");
        assert_eq!(money(0.0), "$0.00");
        assert_eq!(money(0.0912), "$0.0912");
        assert_eq!(money(0.000_000_4), "$0.0000004");
        assert_eq!(money(0.000_000_02), "$0.00000002");
        assert_eq!(money(-1.5), "$-1.50");
        assert_eq!(money(1_000_000_000.0), "$1000000000.00");
    }

    /// One rule: cut down to the millionth, as the ledger and a run's
    /// tally take it (the summary said `$0.123456` where `show` and the
    /// run's counts said `$0.123457`).
    #[test]
    fn amounts_are_cut_down_to_the_millionth_as_the_ledger_keeps_them() {
        assert_eq!(money(0.123_456_789), "$0.123456");
        assert_eq!(money(1.282_884_9), "$1.282884");
        assert_eq!(money(0.000_001_9), "$0.000001");
        assert_eq!(to_micros(0.123_456_789), 123_456);
        assert_eq!(to_micros(0.000_001_9), 1);
        // A float's noise is no millionth less.
        assert_eq!(to_micros(0.3), 300_000);
        assert_eq!(to_micros(0.7 + 0.1), 800_000);
        assert_eq!(to_micros(1_234_567.1), 1_234_567_100_000);
        // A sum is the same whether it is taken cost by cost or at once.
        let carry = Carry::default();
        let summed: i64 = (0..10).map(|_| carry.micros(0.123_456_789)).sum();
        assert_eq!(summed, to_micros(1.234_567_89));
        assert_eq!(money(summed as f64 / 1e6), money(1.234_567_89));
    }

    #[test]
    fn costs_under_a_millionth_add_up() {
        let carry = Carry::default();
        let sum: i64 = (0..10).map(|_| carry.micros(0.000_000_4)).sum();
        assert_eq!(sum, 4);
        let carry = Carry::default();
        let sum: i64 = (0..5).map(|_| carry.micros(0.000_000_6)).sum();
        assert_eq!(sum, 3);
        let carry = Carry::default();
        let sum: i64 = (0..3).map(|_| carry.micros(0.1)).sum();
        assert_eq!(sum, 300_000);
    }
}
