//! Who is alive, decided once for both backends: which seats of the batch
//! lock are live, stale or crashed, and the views' runners and daemons.

use crate::model::{
    BatchInfo, DAEMON_SILENT, Daemon, DaemonInfo, DaemonState, Holder, LockInfo, Millis, RunSeen,
    RunState, Runners, Seat, Taken,
};
use crate::util::identity::{self, Seen};

/// A seat as this host sees it now. A running holder here is live
/// whatever the clocks say (ours may be set ahead, or have jumped); a
/// holder here whose process is gone is dead at once; only a frozen or
/// remote holder is judged by its expiry.
pub fn seat(lock: &LockInfo, now: Millis) -> Seat {
    match identity::holder_seen(&lock.holder) {
        Seen::Gone => Seat::Crashed,
        Seen::Running => Seat::Live,
        Seen::Unknown if lock.expires_at < now => Seat::Silent {
            since: lock.renewed_at,
        },
        Seen::Unknown => Seat::Live,
    }
}

/// Has the seat lapsed: its expiry passed, and its holder is not a process
/// running on this host (see [`seat`])?
pub fn lapsed(lock: &LockInfo, now: Millis) -> bool {
    lock.expires_at < now && !seat(lock, now).is_live()
}

/// Does `run` hold a live seat of `locks` (a batch's)? Its claims have a
/// runner to finish them and hear of them; any other run's claim is
/// orphaned (`cancel` moves it at once, the next run takes it back).
pub fn holds_live_seat(locks: &[LockInfo], run: Option<i64>, now: Millis) -> bool {
    run.is_some_and(|r| {
        locks
            .iter()
            .any(|l| l.run_id == Some(r) && seat(l, now).is_live())
    })
}

/// The runs holding a live seat of `locks` (`seats`: each one judged, in
/// order). Every other run's claim is orphaned, as each claim's own view
/// judges it (`claim_view`): its runner crashed or went silent, or it holds
/// no seat at all (it lost it).
pub fn live_runs(locks: &[LockInfo], seats: &[Seat]) -> Vec<i64> {
    locks
        .iter()
        .zip(seats)
        .filter(|(_, s)| s.is_live())
        .filter_map(|(l, _)| l.run_id)
        .collect()
}

/// Who is alive among a batch's seats and its last run, as of `now`.
/// `claimed_by(live)` counts the claimed items of every run but those
/// `live` by their attempts, `(attempts, how many)`: the orphaned claims,
/// every claim when no runner is live. It is asked only when some item is
/// claimed.
pub(crate) fn runners<E>(
    info: &BatchInfo,
    now: Millis,
    claimed_by: impl FnOnce(&[i64]) -> Result<Vec<(i64, i64)>, E>,
) -> Result<Runners, E> {
    let seats: Vec<Seat> = info.locks.iter().map(|l| seat(l, now)).collect();
    let last_run = info.last_run.as_ref().map(|run| {
        if run.state != RunState::Running {
            return RunSeen::Stored(run.state);
        }
        let holder = Holder {
            host: run.host.clone(),
            pid: run.pid,
            pid_start: None,
        };
        running_seen(run.id, &holder, &info.locks, &seats)
    });
    let orphan_attempts = if info.counts.claimed == 0 {
        Vec::new()
    } else {
        claimed_by(&live_runs(&info.locks, &seats))?
    };
    Ok(Runners {
        seats,
        last_run,
        orphan_attempts,
    })
}

/// A run the store says is running, as it is: by the seat of the lock it
/// holds (`seats` judged from `locks`, in order), found by its id or else
/// by its holder; a run without a seat lost it and is judged by its
/// process alone.
pub(crate) fn running_seen(
    id: i64,
    holder: &Holder,
    locks: &[LockInfo],
    seats: &[Seat],
) -> RunSeen {
    let mine = locks
        .iter()
        .zip(seats)
        .find(|(l, _)| l.run_id == Some(id))
        .or_else(|| {
            locks
                .iter()
                .zip(seats)
                .find(|(l, _)| l.holder.host == holder.host && l.holder.pid == holder.pid)
        });
    let seen = match mine {
        Some((_, s)) => *s,
        None => match identity::holder_seen(holder) {
            Seen::Gone => Seat::Crashed,
            _ => Seat::Live,
        },
    };
    match seen {
        Seat::Live => RunSeen::Stored(RunState::Running),
        Seat::Crashed => RunSeen::Crashed { pid: holder.pid },
        Seat::Silent { since } => RunSeen::Silent { since },
    }
}

/// Whether a daemon runs, by the same rule as a seat: its process here,
/// its heartbeat elsewhere.
pub(crate) fn daemon_state(d: &Daemon, now: Millis) -> DaemonState {
    if d.stopped_at.is_some() {
        return DaemonState::Stopped;
    }
    match identity::holder_seen(&d.holder) {
        Seen::Gone => DaemonState::Crashed,
        Seen::Running => DaemonState::Live,
        Seen::Unknown if now - d.beat_at > DAEMON_SILENT => DaemonState::Silent,
        Seen::Unknown => DaemonState::Live,
    }
}

/// The daemons with their state.
pub(crate) fn daemon_infos(daemons: Vec<Daemon>, now: Millis) -> Vec<DaemonInfo> {
    daemons
        .into_iter()
        .map(|daemon| DaemonInfo {
            state: daemon_state(&daemon, now),
            daemon,
        })
        .collect()
}

/// The batches of `mine` another live daemon schedules, each with the
/// first such daemon (`daemons` newest beat first). Checked, under the
/// daemons' lock, by every write of a daemon's record (`ops::daemons`), so
/// that no two live records ever share a batch.
pub(crate) fn taken(daemons: &[DaemonInfo], mine: &Daemon) -> Vec<Taken> {
    mine.batches
        .iter()
        .filter_map(|batch| {
            let other = daemons.iter().find(|o| {
                o.daemon.token != mine.token && o.live() && o.daemon.batches.contains(batch)
            })?;
            Some(Taken {
                batch: batch.clone(),
                by: other.daemon.holder.clone(),
            })
        })
        .collect()
}

/// The records a daemon starting with `mine` replaces: those not running
/// that scheduled none but its batches (a daemon of other batches, even
/// dead, is still what their views name).
pub(crate) fn superseded<'a>(daemons: &'a [DaemonInfo], mine: &Daemon) -> Vec<&'a str> {
    daemons
        .iter()
        .filter(|d| d.daemon.token != mine.token && !d.live())
        .filter(|d| d.daemon.batches.iter().all(|b| mine.batches.contains(b)))
        .map(|d| d.daemon.token.as_str())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Counts, Run, RunCounts, Trigger};

    const NOW: Millis = 1_800_000_000_000;

    /// A child that runs until killed, as a holder on this host.
    fn child() -> (std::process::Child, Holder) {
        let c = std::process::Command::new("sleep")
            .arg("60")
            .spawn()
            .unwrap();
        let pid = c.id();
        let holder = Holder {
            host: identity::host(),
            pid,
            pid_start: identity::pid_start(pid),
        };
        (c, holder)
    }

    fn far() -> Holder {
        Holder {
            host: "far-host-of-the-test".into(),
            pid: 7,
            pid_start: None,
        }
    }

    fn seat_of(holder: Holder, run: i64, expires_at: Millis) -> LockInfo {
        LockInfo {
            batch: "b".into(),
            token: format!("t{run}"),
            holder,
            run_id: Some(run),
            acquired_at: expires_at - 60_000,
            expires_at,
            renewed_at: expires_at - 1_000,
            stop_by: None,
        }
    }

    fn running(id: i64, holder: &Holder) -> Run {
        Run {
            id,
            batch: "b".into(),
            trigger: Trigger::Manual,
            actor: None,
            host: holder.host.clone(),
            pid: holder.pid,
            started_at: NOW - 5_000,
            ended_at: None,
            state: RunState::Running,
            stopped: None,
            counts: RunCounts::default(),
            summary: None,
        }
    }

    fn info(locks: Vec<LockInfo>, last_run: Option<Run>, claimed: i64) -> BatchInfo {
        BatchInfo {
            counts: Counts {
                claimed,
                ..Counts::default()
            },
            locks,
            last_run,
            ..BatchInfo::empty("b")
        }
    }

    /// `claims`: each claimed item's `(run, attempts)`, counted by
    /// attempts as the store does for those of runs not `live`.
    fn runners_of(i: &BatchInfo, claims: &[(i64, i64)]) -> Runners {
        runners(i, NOW, |live| {
            let mut by = std::collections::BTreeMap::new();
            for (_, attempts) in claims.iter().filter(|(run, _)| !live.contains(run)) {
                *by.entry(*attempts).or_insert(0) += 1;
            }
            Ok::<_, ()>(by.into_iter().collect())
        })
        .unwrap()
    }

    /// Here a process decides, whatever the clocks say; elsewhere the
    /// expiry, and a silent holder is silent since its last renewal.
    #[test]
    fn a_seat_is_live_crashed_or_silent() {
        let (mut c, here) = child();
        assert_eq!(seat(&seat_of(here.clone(), 1, NOW - 1), NOW), Seat::Live);
        assert!(!lapsed(&seat_of(here.clone(), 1, NOW - 1), NOW));
        c.kill().unwrap();
        c.wait().unwrap();
        assert_eq!(
            seat(&seat_of(here.clone(), 1, NOW + 60_000), NOW),
            Seat::Crashed
        );
        assert!(
            !lapsed(&seat_of(here, 1, NOW + 60_000), NOW),
            "not expired: only dead"
        );
        assert_eq!(seat(&seat_of(far(), 1, NOW + 1), NOW), Seat::Live);
        let expired = seat_of(far(), 1, NOW - 1);
        assert_eq!(seat(&expired, NOW), Seat::Silent { since: NOW - 1_001 });
        assert!(lapsed(&expired, NOW));
    }

    #[test]
    fn a_running_run_whose_runner_is_gone_is_crashed_and_its_claims_orphaned() {
        let (mut c, here) = child();
        let i = info(
            vec![seat_of(here.clone(), 4, NOW + 60_000)],
            Some(running(4, &here)),
            2,
        );
        let claims = [(4, 1), (4, 5)];
        let r = runners_of(&i, &claims);
        assert_eq!(
            (r.held(), r.last_run, r.orphaned()),
            (true, Some(RunSeen::Stored(RunState::Running)), 0)
        );
        c.kill().unwrap();
        c.wait().unwrap();
        let r = runners_of(&i, &claims);
        assert_eq!(r.seats, [Seat::Crashed]);
        assert_eq!(r.last_run, Some(RunSeen::Crashed { pid: here.pid }));
        assert_eq!(
            (r.held(), r.orphaned()),
            (false, 2),
            "none held: every claim"
        );
        assert_eq!(
            (
                r.orphans_used_up(5),
                r.orphans_used_up(1),
                r.orphans_used_up(6)
            ),
            (1, 2, 0),
            "the next run quarantines those on their last attempt"
        );
        // No seat at all: the run is judged by its process.
        let i = info(Vec::new(), Some(running(4, &here)), 0);
        assert_eq!(
            runners_of(&i, &[]).last_run,
            Some(RunSeen::Crashed { pid: here.pid })
        );
    }

    #[test]
    fn beside_a_live_runner_every_other_runs_claims_are_orphaned() {
        let (mut c, here) = child();
        let i = info(
            vec![
                seat_of(far(), 8, NOW + 60_000),
                seat_of(far(), 9, NOW - 5_000),
            ],
            Some(running(9, &far())),
            5,
        );
        let r = runners_of(&i, &[(8, 1), (8, 1), (9, 1), (9, 5), (7, 1)]);
        assert_eq!(r.seats[0], Seat::Live);
        assert_eq!(r.last_run, Some(RunSeen::Silent { since: NOW - 6_000 }));
        // Every claim but the live seat's run's: the silent seat's, and
        // that of run 7, which holds no seat at all.
        assert_eq!((r.held(), r.orphaned()), (true, 3));
        assert_eq!(r.orphan_attempts, [(1, 2), (5, 1)]);
        c.kill().unwrap();
        c.wait().unwrap();
        // A finished run is as stored.
        let mut done = running(3, &here);
        done.state = RunState::Ok;
        let r = runners_of(&info(Vec::new(), Some(done), 0), &[]);
        assert_eq!(r.last_run, Some(RunSeen::Stored(RunState::Ok)));
    }

    #[test]
    fn a_daemon_is_live_by_its_process_here_and_its_beat_elsewhere() {
        let (mut c, here) = child();
        let d = |holder: Holder, beat_at: Millis, stopped_at: Option<Millis>| Daemon {
            token: "d".into(),
            holder,
            started_at: NOW - 100_000,
            beat_at,
            stopped_at,
            batches: vec!["b".into()],
            stopping_at: None,
        };
        let long_ago = NOW - DAEMON_SILENT - 1;
        assert_eq!(
            daemon_state(&d(here.clone(), long_ago, None), NOW),
            DaemonState::Live
        );
        assert_eq!(
            daemon_state(&d(far(), NOW - 1_000, None), NOW),
            DaemonState::Live
        );
        assert_eq!(
            daemon_state(&d(far(), long_ago, None), NOW),
            DaemonState::Silent
        );
        assert_eq!(
            daemon_state(&d(far(), NOW, Some(NOW)), NOW),
            DaemonState::Stopped
        );
        c.kill().unwrap();
        c.wait().unwrap();
        assert_eq!(daemon_state(&d(here, NOW, None), NOW), DaemonState::Crashed);

        // A new daemon replaces the dead records of its own batches only.
        let mine = Daemon {
            token: "new".into(),
            batches: vec!["a".into(), "b".into()],
            ..d(far(), NOW, None)
        };
        let known = daemon_infos(
            vec![
                Daemon {
                    token: "dead-b".into(),
                    ..d(far(), long_ago, None)
                },
                Daemon {
                    token: "live-b".into(),
                    ..d(far(), NOW, None)
                },
                Daemon {
                    token: "dead-c".into(),
                    batches: vec!["b".into(), "c".into()],
                    ..d(far(), long_ago, None)
                },
            ],
            NOW,
        );
        assert_eq!(superseded(&known, &mine), ["dead-b"]);
    }
}
