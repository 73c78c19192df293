//! What a worker reported of one attempt beside its answer (its cost, its
//! tokens), and how two reports of one attempt combine: one rule for
//! both (`cost`, `usage` say what a valid value is).

/// A report: none, a valid value, or refused.
#[derive(Debug, Clone, PartialEq, Default)]
pub enum Report<T> {
    #[default]
    Absent,
    Valid(T),
    /// Refused: what was wrong, the value as the worker wrote it (inert,
    /// bounded).
    Refused(String),
}

impl<T> Report<T> {
    /// The first of two reports that is present; a refused one is never
    /// hidden by a valid one.
    #[must_use]
    pub fn or(self, other: Report<T>) -> Report<T> {
        match (self, other) {
            (r @ Report::Refused(_), _) | (_, r @ Report::Refused(_)) => r,
            (Report::Absent, r) => r,
            (r, _) => r,
        }
    }

    /// The value, when it is valid.
    pub fn valid(self) -> Option<T> {
        match self {
            Report::Valid(v) => Some(v),
            Report::Absent | Report::Refused(_) => None,
        }
    }

    /// Two reports of one attempt added up (`@nightshift` lines): a
    /// refused one wins, an absent one adds nothing, two valid ones are
    /// `add`ed (which may refuse the total).
    #[must_use]
    pub fn plus_with(self, other: Report<T>, add: impl FnOnce(T, T) -> Report<T>) -> Report<T> {
        match (self, other) {
            (r @ Report::Refused(_), _) | (_, r @ Report::Refused(_)) => r,
            (Report::Absent, r) | (r, Report::Absent) => r,
            (Report::Valid(a), Report::Valid(b)) => add(a, b),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Report;

    #[test]
    fn a_refused_report_is_never_hidden() {
        let refused = || Report::<i32>::Refused("x".into());
        assert_eq!(Report::Valid(1).or(refused()), refused());
        assert_eq!(Report::Absent.or(Report::Valid(2)), Report::Valid(2));
        assert_eq!(Report::Valid(1).or(Report::Valid(2)), Report::Valid(1));
        let add = |a: i32, b: i32| Report::Valid(a + b);
        assert_eq!(
            Report::Valid(1).plus_with(Report::Valid(2), add),
            Report::Valid(3)
        );
        assert_eq!(
            Report::Absent.plus_with(Report::Valid(2), add),
            Report::Valid(2)
        );
        assert_eq!(refused().plus_with(Report::Valid(2), add), refused());
    }
}
