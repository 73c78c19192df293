//! A count with its noun: "1 attempt", "2 attempts". Every such count the
//! CLI and the dashboard print goes through here, so none says "1 attempts".

use std::fmt::Display;

/// `noun` in the plural (a regular `s`) unless `n` is 1: for a count
/// written another way (the dashboard's `num`).
pub fn of<N: PartialEq + From<u8>>(n: N, noun: &str) -> String {
    if n == N::from(1) {
        noun.to_string()
    } else {
        format!("{noun}s")
    }
}

/// `n` and `noun`, the noun in the plural unless `n` is 1.
pub fn count<N: Display + PartialEq + From<u8> + Copy>(n: N, noun: &str) -> String {
    format!("{n} {}", of(n, noun))
}

#[cfg(test)]
mod tests {
    use super::{count, of};

    #[test]
    fn one_is_singular_and_every_other_count_plural() {
        assert_eq!(count(0usize, "attempt"), "0 attempts");
        assert_eq!(count(1i64, "attempt"), "1 attempt");
        assert_eq!(count(2u64, "marked item"), "2 marked items");
        assert_eq!(of(1u32, "call"), "call");
    }
}
