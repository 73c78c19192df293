//! Every arrival (the clock, the terminal, poll and effect results) in
//! every mode: what it changes, and that it leaves what the user has open
//! (the mode, what is typed, the question asked) as it was.

use super::*;

const MODES: [Mode; 6] = [
    Mode::Normal,
    Mode::Filter,
    Mode::Prompt,
    Mode::Confirm,
    Mode::Help,
    Mode::Notice,
];

/// A summary with something in it (an empty one is a line, not a box).
pub(super) fn summary(since: Millis) -> SinceSummary {
    SinceSummary {
        since,
        runs: vec![("b".into(), "finished".into(), 1)],
        ..SinceSummary::default()
    }
}

/// A run started (one write in flight: `busy` is 1), then `mode` reached
/// by keys (the summary for Notice).
fn in_mode(mode: Mode) -> App {
    let mut app = app();
    step(&mut app, Intent::Resume);
    let keys = match mode {
        Mode::Normal | Mode::Notice => vec![],
        Mode::Filter => vec![
            Intent::GoPane(Pane::Items),
            Intent::StartFilter,
            Intent::Input('k'),
        ],
        Mode::Prompt => vec![Intent::TogglePause, Intent::Input('d')],
        Mode::Confirm => vec![
            Intent::GoPane(Pane::Items),
            Intent::Down,
            Intent::SkipSelected,
        ],
        Mode::Help => vec![Intent::Help, Intent::Down],
    };
    for k in keys {
        step(&mut app, k);
    }
    if mode == Mode::Notice {
        step(&mut app, Arrival::Since(Box::new(summary(NOW - 1))));
    }
    assert_eq!(app.mode, mode);
    assert_eq!(app.busy, 1);
    app
}

/// What the user has open.
#[derive(Debug, Clone, PartialEq)]
struct Open {
    mode: Mode,
    input: String,
    search: String,
    prompt: Option<String>,
    confirm: Option<Write>,
    help_scroll: usize,
    since: Option<Millis>,
}

fn open(app: &App) -> Open {
    Open {
        mode: app.mode,
        input: app.input.clone(),
        search: app.search.clone(),
        prompt: app.prompt.clone(),
        confirm: app.confirm.clone(),
        help_scroll: app.help_scroll,
        since: app.since.as_ref().map(|s| s.since),
    }
}

fn flash(app: &App) -> Option<(&str, bool)> {
    app.flash.as_ref().map(|f| (f.text.as_str(), f.error))
}

#[test]
fn a_tick_moves_the_clock_in_every_mode() {
    for mode in MODES {
        let mut app = in_mode(mode);
        let before = open(&app);
        assert!(app.update(Arrival::Tick(NOW + 5_000)).is_empty());
        assert_eq!(app.now, NOW + 5_000, "{mode:?}");
        assert_eq!(open(&app), before, "{mode:?}");
    }
}

#[test]
fn a_resize_refits_the_lists_in_every_mode() {
    for mode in MODES {
        let mut app = in_mode(mode);
        let before = open(&app);
        assert_eq!(app.log.nav.top, 2, "{mode:?}");
        assert!(app.update(Arrival::Resize(100, 40)).is_empty());
        assert_eq!(app.size, (100, 40), "{mode:?}");
        assert_eq!(app.visible(), 34, "{mode:?}");
        // The run log's 20 events fit now: its view starts at the first.
        assert_eq!(app.log.nav.top, 0, "{mode:?}");
        assert_eq!(open(&app), before, "{mode:?}");
    }
}

#[test]
fn a_poll_answer_is_applied_in_every_mode() {
    for mode in MODES {
        let mut app = in_mode(mode);
        let before = open(&app);
        let mut d = data(&app.query(), false);
        d.batches.push(info("c", false));
        let asked = app.asked;
        let effects = app.update(Arrival::Polled {
            at: NOW + 1_000,
            asked,
            result: Ok(Box::new(d)),
        });
        assert!(effects.is_empty(), "{mode:?}");
        assert_eq!(app.batch_names(), ["a", "b", "c"], "{mode:?}");
        assert_eq!(app.last_ok, Some(NOW + 1_000), "{mode:?}");
        // A failed poll keeps the data and says why.
        app.update(Arrival::Polled {
            at: NOW + 2_000,
            asked,
            result: Err("gone".into()),
        });
        assert_eq!(app.stale.as_deref(), Some("gone"), "{mode:?}");
        assert_eq!(app.batch_names().len(), 3, "{mode:?}");
        // The answer to an older question is not shown.
        let mut old = data(&app.query(), false);
        old.batches.truncate(1);
        app.update(Arrival::Polled {
            at: NOW + 3_000,
            asked: asked.wrapping_sub(1),
            result: Ok(Box::new(old)),
        });
        assert_eq!(app.batch_names().len(), 3, "{mode:?}");
        assert_eq!(open(&app), before, "{mode:?}");
    }
}

#[test]
fn unchanged_keeps_the_data_fresh_in_every_mode() {
    for mode in MODES {
        let mut app = in_mode(mode);
        let before = open(&app);
        let asked = app.asked;
        app.update(Arrival::Polled {
            at: NOW + 1_000,
            asked,
            result: Err("gone".into()),
        });
        // Unchanged since an older question: nothing to say.
        app.update(Arrival::Unchanged {
            at: NOW + 2_000,
            asked: asked.wrapping_sub(1),
        });
        assert_eq!(app.stale.as_deref(), Some("gone"), "{mode:?}");
        let effects = app.update(Arrival::Unchanged {
            at: NOW + 3_000,
            asked,
        });
        assert!(effects.is_empty(), "{mode:?}");
        assert_eq!(app.stale, None, "{mode:?}");
        assert_eq!(app.last_ok, Some(NOW + 3_000), "{mode:?}");
        assert_eq!(open(&app), before, "{mode:?}");
    }
}

#[test]
fn a_finished_write_is_said_in_every_mode() {
    for mode in MODES {
        let mut app = in_mode(mode);
        let before = open(&app);
        let effects = app.update(Arrival::Done {
            ok: true,
            message: "requeued 3".into(),
        });
        assert_eq!(effects, vec![Effect::PollNow], "{mode:?}");
        assert_eq!(app.busy, 0, "{mode:?}");
        assert_eq!(flash(&app), Some(("requeued 3", false)), "{mode:?}");
        let effects = app.update(Arrival::Done {
            ok: false,
            message: "nothing changed: locked".into(),
        });
        assert_eq!(effects, vec![Effect::PollNow], "{mode:?}");
        assert_eq!(app.busy, 0, "{mode:?}: never below zero");
        assert_eq!(
            flash(&app),
            Some(("nothing changed: locked", true)),
            "{mode:?}"
        );
        assert_eq!(open(&app), before, "{mode:?}");
    }
}

#[test]
fn a_runner_ending_is_said_in_every_mode() {
    for mode in MODES {
        let mut app = in_mode(mode);
        let before = open(&app);
        let effects = app.update(Arrival::RunnerExited {
            ok: false,
            message: "the run of a (pid 7) exited with status 3".into(),
        });
        assert_eq!(effects, vec![Effect::PollNow], "{mode:?}");
        assert_eq!(app.busy, 1, "{mode:?}: not a write of ours");
        assert_eq!(
            flash(&app),
            Some(("the run of a (pid 7) exited with status 3", true)),
            "{mode:?}"
        );
        app.update(Arrival::RunnerExited {
            ok: true,
            message: "the run of a (pid 7) finished".into(),
        });
        assert_eq!(
            flash(&app),
            Some(("the run of a (pid 7) finished", false)),
            "{mode:?}"
        );
        assert_eq!(open(&app), before, "{mode:?}");
    }
}

/// The key that closes what `mode` has open (Enter on a filter or the
/// prompt, No to a question, Esc on the help or the summary).
fn close(mode: Mode) -> Intent {
    match mode {
        Mode::Normal => unreachable!("nothing open"),
        Mode::Filter | Mode::Prompt => Intent::Submit,
        Mode::Confirm => Intent::Confirm(false),
        Mode::Help | Mode::Notice => Intent::Back,
    }
}

/// The summary shows at once from Normal mode. In every other mode it
/// waits, without touching what is open, and shows once that is closed.
#[test]
fn the_summary_since_the_last_visit_in_every_mode() {
    for mode in MODES {
        let mut app = in_mode(mode);
        let before = open(&app);
        assert!(
            app.update(Arrival::Since(Box::new(summary(NOW - 7))))
                .is_empty()
        );
        if mode != Mode::Normal {
            assert_eq!(open(&app), before, "{mode:?}: it waits");
            app.update(close(mode));
        }
        assert_eq!(app.mode, Mode::Notice, "{mode:?}");
        assert_eq!(
            app.since.as_ref().map(|s| s.since),
            Some(NOW - 7),
            "{mode:?}"
        );
        app.update(Intent::Back);
        assert_eq!(
            (app.mode, app.since.is_none()),
            (Mode::Normal, true),
            "{mode:?}"
        );
    }
}

/// The counted "requeue all" asks at once from Normal mode. In every other
/// mode its question waits, without touching what is open (typing goes on,
/// a question open is not replaced under the user's keys), and asks once
/// that is closed.
#[test]
fn a_counted_requeue_in_every_mode() {
    let write = Write::Requeue {
        batch: "a".into(),
        keys: vec!["k0".into(), "k3".into()],
        what: "all failed in a".into(),
    };
    for mode in MODES {
        let mut app = in_mode(mode);
        let before = open(&app);
        assert!(app.update(Arrival::Prepared(write.clone())).is_empty());
        assert_eq!(app.busy, 0, "{mode:?}");
        if mode != Mode::Normal {
            assert_eq!(open(&app), before, "{mode:?}: it waits");
            let effects = app.update(close(mode));
            match mode {
                Mode::Prompt => assert!(
                    matches!(&effects[..], [Effect::Write(Write::Pause { reason, .. })] if reason == "d"),
                    "{effects:?}"
                ),
                _ => assert!(effects.is_empty(), "{mode:?}: {effects:?}"),
            }
        }
        assert_eq!(app.mode, Mode::Confirm, "{mode:?}");
        assert_eq!(app.confirm, Some(write.clone()), "{mode:?}");
        assert_eq!(
            app.update(Intent::Confirm(true)),
            vec![Effect::Write(write.clone())],
            "{mode:?}"
        );
    }
}

/// Nothing to requeue: no question in any mode, only a message.
#[test]
fn a_count_of_nothing_asks_nothing_in_every_mode() {
    for mode in MODES {
        let mut app = in_mode(mode);
        let before = open(&app);
        let nothing = Write::Requeue {
            batch: "a".into(),
            keys: vec![],
            what: "all failed in a".into(),
        };
        assert!(app.update(Arrival::Prepared(nothing)).is_empty());
        assert_eq!(app.busy, 0, "{mode:?}");
        assert_eq!(
            flash(&app),
            Some(("no failed items to requeue: all failed in a", false)),
            "{mode:?}"
        );
        assert_eq!(open(&app), before, "{mode:?}");
    }
}

/// The count arrives while the pause prompt is open: its question waits,
/// and shows once the prompt is answered (it used to be set and never
/// shown). A summary that came meanwhile shows before it.
#[test]
fn a_dialog_that_arrives_over_the_prompt_opens_once_it_is_answered() {
    let write = Write::Requeue {
        batch: "a".into(),
        keys: vec!["k0".into()],
        what: "all failed in a".into(),
    };
    let mut app = in_mode(Mode::Prompt);
    app.update(Arrival::Since(Box::new(summary(NOW - 7))));
    app.update(Arrival::Prepared(write.clone()));
    assert_eq!(app.mode, Mode::Prompt, "the prompt keeps the keyboard");
    app.update(Intent::Input('x'));
    assert_eq!(app.input, "dx");
    let effects = app.update(Intent::Submit);
    assert!(
        matches!(&effects[..], [Effect::Write(Write::Pause { reason, .. })] if reason == "dx"),
        "{effects:?}"
    );
    assert_eq!(app.mode, Mode::Notice);
    assert_eq!(app.since.as_ref().map(|s| s.since), Some(NOW - 7));
    app.update(Intent::Back);
    assert_eq!(app.mode, Mode::Confirm);
    assert_eq!(app.confirm, Some(write.clone()));
    assert_eq!(
        app.update(Intent::Confirm(true)),
        vec![Effect::Write(write)]
    );
    assert_eq!(app.mode, Mode::Normal);
}
