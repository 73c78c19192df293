//! The Items pane's state filter (`s`): a status, or one outcome of done
//! items, in the order `s` steps through them. Its values are the words the
//! counts use (`model::Counts`): `done` is the outcome, apart from `empty`
//! and `skipped`.

use crate::model::{Outcome, Status};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StateFilter {
    Pending,
    Claimed,
    Done,
    Empty,
    Skipped,
    Failed,
}

impl StateFilter {
    /// The order `s` steps through (after "all").
    pub const ALL: [StateFilter; 6] = [
        StateFilter::Pending,
        StateFilter::Claimed,
        StateFilter::Done,
        StateFilter::Empty,
        StateFilter::Skipped,
        StateFilter::Failed,
    ];

    /// The filter after `current` (`None` is "all").
    pub fn next(current: Option<StateFilter>) -> Option<StateFilter> {
        match current {
            None => Some(Self::ALL[0]),
            Some(f) => {
                let i = Self::ALL.iter().position(|x| *x == f).unwrap_or(0);
                Self::ALL.get(i + 1).copied()
            }
        }
    }

    /// The filter before `current` (`S`: from "all" to `failed` at once).
    pub fn prev(current: Option<StateFilter>) -> Option<StateFilter> {
        match current {
            None => Self::ALL.last().copied(),
            Some(f) => {
                let i = Self::ALL.iter().position(|x| *x == f).unwrap_or(0);
                i.checked_sub(1).map(|i| Self::ALL[i])
            }
        }
    }

    pub fn status(self) -> Status {
        match self {
            StateFilter::Pending => Status::Pending,
            StateFilter::Claimed => Status::Claimed,
            StateFilter::Done | StateFilter::Empty | StateFilter::Skipped => Status::Done,
            StateFilter::Failed => Status::Failed,
        }
    }

    pub fn outcome(self) -> Option<Outcome> {
        match self {
            StateFilter::Done => Some(Outcome::Done),
            StateFilter::Empty => Some(Outcome::Empty),
            StateFilter::Skipped => Some(Outcome::Skipped),
            _ => None,
        }
    }

    pub fn label(self) -> &'static str {
        match self {
            StateFilter::Pending => "pending",
            StateFilter::Claimed => "claimed",
            StateFilter::Done => "done",
            StateFilter::Empty => "empty",
            StateFilter::Skipped => "skipped",
            StateFilter::Failed => "failed",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn s_steps_through_every_state_and_back_to_all() {
        let mut seen = Vec::new();
        let mut f = StateFilter::next(None);
        while let Some(x) = f {
            seen.push(x.label());
            f = StateFilter::next(f);
        }
        assert_eq!(
            seen,
            ["pending", "claimed", "done", "empty", "skipped", "failed"]
        );
        assert_eq!(StateFilter::prev(None), Some(StateFilter::Failed));
        assert_eq!(StateFilter::prev(Some(StateFilter::Pending)), None);
        assert_eq!(
            StateFilter::prev(Some(StateFilter::Failed)),
            Some(StateFilter::Skipped)
        );
        assert_eq!(StateFilter::Empty.status(), Status::Done);
        assert_eq!(StateFilter::Empty.outcome(), Some(Outcome::Empty));
        assert_eq!(StateFilter::Failed.outcome(), None);
    }
}
