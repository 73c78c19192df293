//! `App::update` without a terminal or a store: navigation, filters,
//! confirm flows, read-only refusal.

use super::*;
use crate::model::{BatchInfo, Status};
use crate::model::{Counts, DlqGroup, Event, Pause, Tier};
use crate::store::{BatchView, ItemPage, ItemRow};
use crate::store::{DashQuery, ItemsQuery};
use crate::tui::action::{Action, Arrival, Effect, Intent};
use crate::tui::theme::Palette;

const NOW: Millis = 1_767_268_800_000;

// The config file read again while the dashboard is open.
mod config;
// Marks in the item lists and what R, x and c do with them.
mod marks;
// The Pools pane and the pools a poll reads.
mod pools;

fn row(i: usize, status: Status) -> ItemRow {
    ItemRow {
        key: format!("k{i}"),
        label: format!("k{i}"),
        status,
        tier: (status == Status::Failed).then_some(Tier::Retry),
        outcome: None,
        attempts: 1,
        error_class: (status == Status::Failed).then(|| "TimeoutError".to_string()),
        error_message: None,
        updated_at: NOW,
    }
}

fn info(name: &str, paused: bool) -> BatchView {
    BatchView {
        info: BatchInfo {
            name: name.into(),
            counts: Counts {
                pending: 50,
                retry: 50,
                ..Counts::default()
            },
            pause: paused.then(|| Pause {
                reason: "r".into(),
                by: "me@h".into(),
                at: NOW,
            }),
            ..BatchInfo::default()
        },
        minutes: vec![(0, 0); 5],
        created_at: NOW,
    }
}

/// A poll answer for `q`: 100 items, every third failed.
fn data(q: &DashQuery, paused: bool) -> Dashboard {
    let page = |iq: &ItemsQuery| ItemPage {
        searching: None,
        offset: iq.offset,
        rows: (iq.offset..(iq.offset + iq.limit).min(100))
            .map(|i| {
                row(
                    i,
                    if i % 3 == 0 {
                        Status::Failed
                    } else {
                        Status::Pending
                    },
                )
            })
            .collect(),
        total: 100,
        capped: false,
    };
    Dashboard {
        batches: vec![info("a", paused), info("b", false)],
        items: q.items.as_ref().map(page),
        class_items: q.class_items.as_ref().map(page),
        dlq: vec![DlqGroup {
            error_class: "TimeoutError".into(),
            last_24h: 3,
            prev_24h: 1,
            total: 4,
            retry_now: 2,
            manual_now: 1,
        }],
        events: (1..=20)
            .map(|id| Event {
                id,
                at: NOW,
                batch: Some("a".into()),
                run_id: None,
                key: Some(format!("k{id}")),
                label: Some(format!("label {id}")),
                kind: "done".into(),
                actor: None,
                message: "m".into(),
                fields: serde_json::Value::Null,
            })
            .collect(),
        ..Dashboard::default()
    }
}

fn app_with(read_only: bool, paused: bool) -> App {
    let mut app = App::new(Setup::new("/x.db", "h", read_only, Palette::Mono), NOW);
    app.update(Arrival::Resize(80, 24));
    poll(&mut app, paused);
    app
}

fn app() -> App {
    app_with(false, false)
}

fn poll(app: &mut App, paused: bool) {
    for _ in 0..3 {
        let q = app.query();
        let asked = app.asked;
        app.update(Arrival::Polled {
            at: NOW,
            asked,
            result: Ok(Box::new(data(&q, paused))),
        });
        if app.query() == q && app.asked == asked {
            break;
        }
    }
}

/// The event loop and the poller as they talk: the loop sends the
/// question when it changed since it last sent one (after all the keys of
/// one read), and the poller answers a question it answered last with
/// "unchanged" (the store did not change).
#[derive(Default)]
struct Wire {
    sent: Option<(DashQuery, u64)>,
}

impl Wire {
    /// Keys that arrived together, then what the poller sends back.
    fn keys(&mut self, app: &mut App, keys: &[Intent]) {
        for k in keys {
            app.update(k.clone());
        }
        for _ in 0..3 {
            let question = (app.query(), app.asked);
            if self.sent.as_ref() == Some(&question) {
                // Nothing new asked: the next interval's poll of the same
                // question finds the store unchanged.
                app.update(Arrival::Unchanged {
                    at: NOW,
                    asked: question.1,
                });
                return;
            }
            self.sent = Some(question.clone());
            app.update(Arrival::Polled {
                at: NOW,
                asked: question.1,
                result: Ok(Box::new(with_detail(&question.0))),
            });
        }
    }
}

fn detail_shown(app: &App) -> Option<String> {
    let open = app.open_detail()?;
    match &app.data.detail {
        Some(Ok(d)) if d.item.key == open.key => Some(d.item.key.clone()),
        _ => None,
    }
}

fn with_detail(q: &DashQuery) -> Dashboard {
    let mut d = data(q, false);
    d.detail = q.detail.as_ref().map(|key| {
        Ok(crate::store::ItemDetail {
            item: crate::model::Item {
                label: format!("label of {key}"),
                ..crate::model::Item::for_test("a", key, NOW)
            },
            failures: Vec::new(),
            attempt_logs: Vec::new(),
            events: Vec::new(),
        })
    });
    d
}

#[test]
fn fast_keys_from_a_detail_never_leave_it_loading() {
    for keys in [
        // Back, the next row, open: all in one read.
        vec![Intent::Back, Intent::Down, Intent::Open],
        // Back and open the same item again.
        vec![Intent::Back, Intent::Open],
        // Up and down again: the same item.
        vec![Intent::Back, Intent::Up, Intent::Down, Intent::Open],
    ] {
        let mut app = app();
        let mut wire = Wire::default();
        wire.keys(&mut app, &[Intent::GoPane(Pane::Items)]);
        wire.keys(&mut app, &[Intent::Down, Intent::Down, Intent::Open]);
        assert_eq!(detail_shown(&app).as_deref(), Some("k2"));
        wire.keys(&mut app, &keys);
        let open = app.open_detail().map(|d| d.key.clone());
        assert!(open.is_some(), "{keys:?}: a detail is open");
        assert_eq!(
            detail_shown(&app),
            open,
            "{keys:?}: the detail is shown, not loading"
        );
    }
}

#[test]
fn an_answer_to_an_older_question_is_not_shown() {
    let mut app = app();
    let mut wire = Wire::default();
    wire.keys(&mut app, &[Intent::GoPane(Pane::Items)]);
    let old = (app.query(), app.asked);
    // The next batch; the answer about the first one arrives after it.
    app.update(Intent::NextBatch);
    assert_eq!(app.batch.as_deref(), Some("b"));
    let mut stale = data(&old.0, false);
    stale.items.as_mut().unwrap().rows[0].key = "of batch a".into();
    app.update(Arrival::Polled {
        at: NOW,
        asked: old.1,
        result: Ok(Box::new(stale)),
    });
    assert!(app.data.items.is_none(), "batch a's items under batch b");
    wire.keys(&mut app, &[]);
    assert_eq!(app.data.items.as_ref().unwrap().rows[0].key, "k0");
}

fn step(app: &mut App, action: impl Into<Action>) -> Vec<Effect> {
    let effects = app.update(action);
    poll(app, false);
    effects
}

#[test]
fn panes_cycle_and_jump() {
    let mut app = app();
    assert_eq!(app.pane, Pane::Batches);
    // No pools in the config: no Pools tab to step to.
    step(&mut app, Intent::PrevPane);
    assert_eq!(app.pane, Pane::Log);
    step(&mut app, Intent::NextPane);
    step(&mut app, Intent::NextPane);
    assert_eq!(app.pane, Pane::Activity);
    step(&mut app, Intent::GoPane(Pane::DeadLetters));
    assert_eq!(app.pane, Pane::DeadLetters);
}

#[test]
fn first_batch_is_selected_and_switching_resets_the_items() {
    let mut app = app();
    assert_eq!(app.batch.as_deref(), Some("a"));
    step(&mut app, Intent::GoPane(Pane::Items));
    step(&mut app, Intent::Down);
    assert_eq!(app.items.sel, 1);
    step(&mut app, Intent::NextBatch);
    assert_eq!(app.batch.as_deref(), Some("b"));
    assert_eq!(app.items.sel, 0);
    step(&mut app, Intent::NextBatch);
    assert_eq!(app.batch.as_deref(), Some("b"), "stays on the last batch");
    step(&mut app, Intent::PrevBatch);
    assert_eq!(app.batch.as_deref(), Some("a"));
}

#[test]
fn scrolling_items_moves_the_read_window_only_when_needed() {
    let mut app = app();
    step(&mut app, Intent::GoPane(Pane::Items));
    let first = app.query().items.unwrap();
    assert_eq!(first.offset, 0);
    step(&mut app, Intent::PageDown);
    assert_eq!(app.query().items.unwrap(), first, "still inside the window");
    step(&mut app, Intent::Bottom);
    assert_eq!(app.items.sel, 99);
    let q = app.query().items.unwrap();
    assert!(q.offset <= 99 && q.offset + q.limit > 99, "{q:?}");
    assert_eq!(app.selected_row().map(|r| r.key.as_str()), Some("k99"));
    step(&mut app, Intent::Top);
    assert_eq!(app.query().items.unwrap().offset, 0);
    assert_eq!(app.items.top, 0);
}

#[test]
fn search_filter_is_live_and_esc_clears_it() {
    let mut app = app();
    step(&mut app, Intent::GoPane(Pane::Items));
    step(&mut app, Intent::Down);
    step(&mut app, Intent::StartFilter);
    assert_eq!(app.mode, Mode::Filter);
    for c in "k1".chars() {
        step(&mut app, Intent::Input(c));
    }
    assert_eq!(app.query().items.unwrap().search, "k1");
    assert_eq!(app.items.sel, 0, "a new filter starts at the top");
    // Navigation keys are typed, not obeyed, while filtering.
    step(&mut app, Intent::Input('j'));
    assert_eq!(app.search, "k1j");
    step(&mut app, Intent::Backspace);
    step(&mut app, Intent::Submit);
    assert_eq!(app.mode, Mode::Normal);
    assert_eq!(app.search, "k1");
    step(&mut app, Intent::CycleStatus);
    assert_eq!(app.query().items.unwrap().status, Some(Status::Pending));
    step(&mut app, Intent::Back);
    assert_eq!(app.search, "");
    assert_eq!(app.status_filter, None);
    // Esc while typing clears too.
    step(&mut app, Intent::StartFilter);
    step(&mut app, Intent::Input('x'));
    step(&mut app, Intent::Cancel);
    assert_eq!((app.mode, app.search.as_str()), (Mode::Normal, ""));
}

#[test]
fn log_kinds_filter_and_follow() {
    let mut app = app();
    step(&mut app, Intent::GoPane(Pane::Log));
    assert!(app.log.follow);
    assert_eq!(app.log.nav.sel, 19);
    step(&mut app, Intent::Up);
    assert!(!app.log.follow, "scrolling back holds the log still");
    assert_eq!(app.query().events.unwrap().up_to, Some(20));
    assert_eq!(app.log.nav.sel, 18);
    step(&mut app, Intent::Bottom);
    assert!(app.log.follow);
    assert_eq!(app.query().events.unwrap().up_to, None);
    step(&mut app, Intent::StartFilter);
    for c in "failed, empty".chars() {
        step(&mut app, Intent::Input(c));
    }
    step(&mut app, Intent::Submit);
    assert_eq!(app.query().events.unwrap().kinds, vec!["failed", "empty"]);
    step(&mut app, Intent::ToggleLogBatch);
    assert_eq!(app.query().events.unwrap().batch.as_deref(), Some("a"));
}

#[test]
fn enter_opens_the_detail_and_esc_goes_back() {
    let mut app = app();
    step(&mut app, Intent::GoPane(Pane::Items));
    step(&mut app, Intent::Down);
    step(&mut app, Intent::Open);
    assert_eq!(app.query().detail.as_deref(), Some("k1"));
    step(&mut app, Intent::GoPane(Pane::Log));
    assert_eq!(
        app.query().detail,
        None,
        "the detail belongs to the items pane"
    );
    step(&mut app, Intent::GoPane(Pane::Items));
    step(&mut app, Intent::Back);
    assert!(app.detail.is_none());
    // Dead letters: Enter opens the class, Esc closes it.
    step(&mut app, Intent::GoPane(Pane::DeadLetters));
    step(&mut app, Intent::Open);
    assert_eq!(
        app.query().class_items.unwrap().class.as_deref(),
        Some("TimeoutError")
    );
    step(&mut app, Intent::Back);
    assert_eq!(app.query().class_items, None);
}

#[test]
fn requeue_all_counts_first_then_asks_with_no_as_default() {
    let mut app = app();
    step(&mut app, Intent::GoPane(Pane::Items));
    let effects = step(&mut app, Intent::RequeueAll);
    let [Effect::PrepareRequeue { batch, query, .. }] = effects.as_slice() else {
        panic!("{effects:?}");
    };
    assert_eq!(batch, "a");
    assert_eq!(query.status, Some(Status::Failed));
    assert_eq!(app.busy, 1);
    let write = Write::Requeue {
        batch: "a".into(),
        keys: vec!["k0".into(), "k3".into(), "k6".into()],
        what: "all failed in a".into(),
    };
    step(&mut app, Arrival::Prepared(write.clone()));
    assert_eq!(app.mode, Mode::Confirm);
    assert!(
        write.question().starts_with("Requeue 3 failed items"),
        "{}",
        write.question()
    );
    // No: nothing happens.
    assert!(step(&mut app, Intent::Confirm(false)).is_empty());
    assert_eq!(app.mode, Mode::Normal);
    // Yes: the write, exactly as counted.
    step(&mut app, Arrival::Prepared(write.clone()));
    assert_eq!(
        step(&mut app, Intent::Confirm(true)),
        vec![Effect::Write(write)]
    );
    assert_eq!(
        step(
            &mut app,
            Arrival::Done {
                ok: true,
                message: "requeued 3".into()
            }
        ),
        vec![Effect::PollNow]
    );
    assert_eq!(app.busy, 0);
    // Nothing to requeue: no dialog.
    step(
        &mut app,
        Arrival::Prepared(Write::Requeue {
            batch: "a".into(),
            keys: vec![],
            what: "x".into(),
        }),
    );
    assert_eq!(app.mode, Mode::Normal);
}

#[test]
fn requeue_all_of_a_class_from_the_dead_letters() {
    let mut app = app();
    step(&mut app, Intent::GoPane(Pane::DeadLetters));
    let effects = step(&mut app, Intent::RequeueAll);
    let [Effect::PrepareRequeue { query, what, .. }] = effects.as_slice() else {
        panic!("{effects:?}");
    };
    assert_eq!(query.class.as_deref(), Some("TimeoutError"));
    assert!(what.contains("TimeoutError"), "{what}");
}

#[test]
fn requeue_one_needs_a_failed_item_and_skip_asks() {
    let mut app = app();
    step(&mut app, Intent::GoPane(Pane::Items));
    let effects = step(&mut app, Intent::RequeueSelected);
    assert!(
        matches!(&effects[..], [Effect::Write(Write::Requeue { keys, .. })] if keys == &["k0"])
    );
    step(&mut app, Intent::Down);
    assert!(
        step(&mut app, Intent::RequeueSelected).is_empty(),
        "k1 is pending"
    );
    assert!(app.flash.as_ref().unwrap().text.contains("only failed"));
    assert!(step(&mut app, Intent::SkipSelected).is_empty());
    assert_eq!(app.mode, Mode::Confirm);
    assert_eq!(
        app.confirm,
        Some(Write::Skip {
            batch: "a".into(),
            key: "k1".into(),
            label: "k1".into()
        })
    );
    let effects = step(&mut app, Intent::Confirm(true));
    assert_eq!(
        effects,
        vec![Effect::Write(Write::Skip {
            batch: "a".into(),
            key: "k1".into(),
            label: "k1".into()
        })]
    );
}

#[test]
fn cancel_and_stop_ask_naming_what_they_act_on() {
    let mut app = app();
    step(&mut app, Intent::GoPane(Pane::Items));
    step(&mut app, Intent::Down);
    assert!(step(&mut app, Intent::CancelSelected).is_empty());
    assert_eq!(app.mode, Mode::Confirm);
    let cancel = Write::Cancel {
        batch: "a".into(),
        key: "k1".into(),
        label: "k1".into(),
        claimed: false,
    };
    assert_eq!(app.confirm, Some(cancel.clone()));
    assert!(
        cancel.question().contains("k1 of a"),
        "{}",
        cancel.question()
    );
    assert_eq!(
        step(&mut app, Intent::Confirm(true)),
        vec![Effect::Write(cancel)]
    );
    // No is the default: nothing is written.
    step(&mut app, Intent::StopRuns);
    assert_eq!(app.confirm, Some(Write::Stop { batch: "a".into() }));
    assert!(step(&mut app, Intent::Confirm(false)).is_empty());
    step(&mut app, Intent::StopRuns);
    assert_eq!(
        step(&mut app, Intent::Confirm(true)),
        vec![Effect::Write(Write::Stop { batch: "a".into() })]
    );
}

/// A claimed item's cancel does not say its worker is stopped: a claim
/// may wait to retry or for a pool place, with no worker (the row does not
/// say which); the dialog says what happens in each case.
#[test]
fn the_cancel_of_a_claim_says_what_happens_whether_or_not_a_worker_runs() {
    let mut app = app();
    step(&mut app, Intent::GoPane(Pane::Items));
    step(&mut app, Intent::Down);
    app.data.items.as_mut().unwrap().rows[1].status = Status::Claimed;
    step(&mut app, Intent::CancelSelected);
    let question = app.confirm.as_ref().unwrap().question();
    assert!(!question.contains("Its worker is stopped"), "{question}");
    assert!(
        question.contains("A worker running it is stopped"),
        "{question}"
    );
    assert!(
        question.contains("waiting to retry or for a pool place is dropped"),
        "{question}"
    );
}

/// `c` on a quarantined item does not ask to send it where it is: it says
/// so, as `nightshift cancel` does (the dialog said "it goes to manual").
#[test]
fn cancel_of_a_quarantined_item_says_there_is_nothing_to_do() {
    let mut app = app();
    step(&mut app, Intent::GoPane(Pane::Items));
    step(&mut app, Intent::Down);
    let k1 = &mut app.data.items.as_mut().unwrap().rows[1];
    (k1.status, k1.tier) = (Status::Failed, Some(Tier::Manual));
    assert!(app.update(Intent::CancelSelected).is_empty());
    assert_eq!(app.confirm, None);
    let said = &app.flash.as_ref().unwrap().text;
    assert!(said.contains("k1 is already failed/manual"), "{said}");
}

#[test]
fn pause_asks_why_and_unpause_asks_first() {
    let mut app = app();
    assert!(step(&mut app, Intent::TogglePause).is_empty());
    assert_eq!(app.mode, Mode::Prompt);
    for c in "deploy".chars() {
        app.update(Intent::Input(c));
    }
    let effects = app.update(Intent::Submit);
    assert_eq!(
        effects,
        vec![Effect::Write(Write::Pause {
            batch: "a".into(),
            reason: "deploy".into()
        })]
    );
    // An empty reason gets a default one; Esc cancels.
    app.update(Intent::TogglePause);
    let effects = app.update(Intent::Submit);
    assert!(
        matches!(&effects[..], [Effect::Write(Write::Pause { reason, .. })] if reason == DEFAULT_PAUSE_REASON)
    );
    app.update(Intent::TogglePause);
    assert!(app.update(Intent::Cancel).is_empty());
    // Paused: p asks to unpause.
    let mut app = app_with(false, true);
    app.update(Intent::TogglePause);
    assert_eq!(app.confirm, Some(Write::Unpause { batch: "a".into() }));
    assert_eq!(
        app.update(Intent::Confirm(true)),
        vec![Effect::Write(Write::Unpause { batch: "a".into() })]
    );
}

#[test]
fn resume_starts_a_runner() {
    let mut app = app();
    assert_eq!(
        app.update(Intent::Resume),
        vec![Effect::Write(Write::Resume { batch: "a".into() })]
    );
}

/// `r` on a paused batch started a runner that stepped down at once, and
/// the footer said the run "finished": nothing starts, and it says why.
#[test]
fn resume_of_a_paused_batch_starts_nothing_and_says_why() {
    let mut app = app_with(false, true);
    assert!(app.update(Intent::Resume).is_empty());
    let said = &app.flash.as_ref().unwrap().text;
    assert_eq!(
        said,
        "a is paused: a run would do nothing; p (pause) unpauses it"
    );
}

#[test]
fn read_only_refuses_every_write_key() {
    for pane in Pane::ALL {
        let mut app = app_with(true, false);
        step(&mut app, Intent::GoPane(pane));
        for action in [
            Intent::Resume,
            Intent::TogglePause,
            Intent::RequeueSelected,
            Intent::RequeueAll,
            Intent::SkipSelected,
            Intent::CancelSelected,
            Intent::StopRuns,
            Intent::ToggleMark,
        ] {
            let effects = step(&mut app, action.clone());
            assert!(effects.is_empty(), "{pane:?} {action:?}: {effects:?}");
            assert_eq!(app.mode, Mode::Normal, "{pane:?} {action:?}");
            assert!(app.flash.as_ref().unwrap().text.starts_with("read-only"));
        }
        // Even a write that got into a dialog some other way is refused.
        app.confirm = Some(Write::Resume { batch: "a".into() });
        app.mode = Mode::Confirm;
        assert!(app.update(Intent::Confirm(true)).is_empty());
    }
}

#[test]
fn a_failed_poll_marks_stale_and_keeps_the_last_data() {
    let mut app = app();
    app.update(Arrival::Polled {
        at: NOW + 5000,
        asked: app.asked,
        result: Err("gone".into()),
    });
    assert_eq!(app.stale.as_deref(), Some("gone"));
    assert_eq!(app.last_ok, Some(NOW));
    assert_eq!(app.data.batches.len(), 2);
    poll(&mut app, false);
    assert_eq!(app.stale, None);
}

#[test]
fn liveness_has_no_clock_and_speaks_only_when_the_data_is_old() {
    use crate::tui::app::Liveness;
    let mut app = app();
    let last = app.last_ok.unwrap();
    app.update(Arrival::Tick(last + app.setup.stale_after));
    assert_eq!(app.liveness(), Liveness::Live);
    app.update(Arrival::Tick(last + app.setup.stale_after + 2000));
    let age = ((app.setup.stale_after + 2000) / 1000) as u64;
    assert_eq!(app.liveness(), Liveness::Silent { age });
    app.update(Arrival::Polled {
        at: app.now,
        asked: app.asked,
        result: Err("gone".into()),
    });
    assert_eq!(
        app.liveness(),
        Liveness::Failing {
            err: "gone",
            age: Some(age)
        }
    );
}

#[test]
fn quit_from_every_mode() {
    for setup in [
        vec![],
        vec![Intent::Help],
        vec![Intent::GoPane(Pane::Items), Intent::StartFilter],
        vec![Intent::TogglePause],
        vec![
            Intent::GoPane(Pane::Items),
            Intent::Down,
            Intent::SkipSelected,
        ],
    ] {
        let mut app = app();
        for a in setup {
            step(&mut app, a);
        }
        assert_eq!(app.update(Intent::Quit), vec![Effect::Quit]);
        assert!(app.quit);
    }
}

#[test]
fn since_summary_is_shown_and_dismissed() {
    let mut app = app();
    app.update(Arrival::Since(Box::new(arrivals::summary(NOW - 1000))));
    assert_eq!(app.mode, Mode::Notice);
    app.update(Intent::Back);
    assert_eq!(app.mode, Mode::Normal);
    assert!(app.since.is_none());
}

/// Nothing since the last visit is said in a line; no box opens to take
/// the first key.
#[test]
fn an_empty_since_summary_is_a_line_not_a_box() {
    let mut app = app();
    step(&mut app, Arrival::Tick(NOW));
    app.update(Arrival::Since(Box::new(SinceSummary {
        since: NOW - 3 * 3_600_000,
        ..SinceSummary::default()
    })));
    assert_eq!(app.mode, Mode::Normal);
    assert!(app.since.is_none());
    let flash = app.flash_text().expect("a line says so");
    assert_eq!(
        flash.text,
        "nothing failed, ran or fired since your last visit (3h0m ago)"
    );
    step(&mut app, Intent::GoPane(Pane::Items));
    assert_eq!(app.pane, Pane::Items);
}

mod arrivals;

/// The mode picks the keymap: the Normal keys that another mode does not
/// bind do nothing there (they used to reach the Normal handling from a
/// question, the help or the summary).
#[test]
fn a_mode_reads_only_its_own_keys() {
    use crate::tui::keymap;
    let setups: [(Mode, Vec<Intent>); 5] = [
        (Mode::Filter, vec![Intent::StartFilter]),
        (Mode::Prompt, vec![Intent::TogglePause]),
        (Mode::Confirm, vec![Intent::Down, Intent::SkipSelected]),
        (Mode::Help, vec![Intent::Help]),
        (Mode::Notice, vec![]),
    ];
    for (mode, keys) in setups {
        let own: Vec<Intent> = keymap::bindings(mode, Pane::Items)
            .map(|b| b.intent.clone())
            .collect();
        let others = keymap::bindings(Mode::Normal, Pane::Items)
            .map(|b| b.intent.clone())
            .filter(|i| !own.contains(i));
        for intent in others {
            let mut app = app();
            step(&mut app, Intent::GoPane(Pane::Items));
            for k in &keys {
                step(&mut app, k.clone());
            }
            if mode == Mode::Notice {
                app.update(Arrival::Since(Box::new(arrivals::summary(NOW - 1000))));
            }
            assert_eq!(app.mode, mode);
            let before = (
                app.pane,
                app.items.sel,
                app.input.clone(),
                app.confirm.clone(),
                app.status_filter,
                app.busy,
            );
            let effects = app.update(intent.clone());
            assert!(effects.is_empty(), "{mode:?} {intent:?}: {effects:?}");
            assert_eq!(app.mode, mode, "{mode:?} {intent:?}");
            let after = (
                app.pane,
                app.items.sel,
                app.input.clone(),
                app.confirm.clone(),
                app.status_filter,
                app.busy,
            );
            assert_eq!(after, before, "{mode:?} {intent:?}");
        }
    }
}
