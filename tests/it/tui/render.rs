//! The dashboard drawn into ratatui's `TestBackend` from a fixture store,
//! every pane at 80×24 and 160×48, with colours and without. The clock,
//! host and store path are injected, so the snapshots are exact.

use crate::support::fixture;

use std::collections::BTreeMap;

use nightshift::config::Schedule;
use nightshift::store::{Access, RunEnd, Store};
use nightshift::tui::action::{Action, Arrival, Intent, Pane};
use nightshift::tui::app::{App, BatchSchedule, Setup};
use nightshift::tui::theme::Palette;
use nightshift::tui::ui;
use ratatui::Terminal;
use ratatui::backend::TestBackend;

use fixture::NOW;

struct Fx {
    _dir: tempfile::TempDir,
    store: Store,
}

fn fixture() -> Fx {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("nightshift.db");
    fixture::build(
        &db,
        &fixture::Options {
            now: NOW,
            running: true,
        },
    );
    let store = Store::open(&db, Access::ReadOnly).unwrap();
    Fx { _dir: dir, store }
}

/// The fixture's store, open for a test's own writes.
fn writable_fixture(running: bool) -> (tempfile::TempDir, Store) {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("nightshift.db");
    fixture::build(&db, &fixture::Options { now: NOW, running });
    let store = Store::open(&db, Access::ReadWrite).unwrap();
    (dir, store)
}

/// A poll's data, given to `app` as the poller gives it.
fn deliver(app: &mut App, data: nightshift::store::Dashboard, at: nightshift::model::Millis) {
    app.update(Arrival::Polled {
        at,
        asked: app.asked,
        result: Ok(Box::new(data)),
    });
}

/// One poll of `store` at `at`.
fn poll_at(app: &mut App, store: &Store, at: nightshift::model::Millis) {
    let data = store.dashboard(&app.query(), at).unwrap();
    deliver(app, data, at);
}

fn setup(palette: Palette, read_only: bool) -> Setup {
    let mut setup = Setup::new("/srv/nightshift/nightshift.db", "box-1", read_only, palette);
    let mut schedules = BTreeMap::new();
    schedules.insert(
        "articles".to_string(),
        BatchSchedule {
            schedule: Schedule::parse("0 2 * * *").unwrap(),
            tz: chrono_tz::Asia::Tokyo,
            catch_up: None,
        },
    );
    setup.config.schedules = schedules;
    setup.config.batches = vec!["articles".into(), "newsletter".into()];
    setup
}

/// Feeds actions, polling the fixture after each as the poller would.
fn drive(fx: &Fx, app: &mut App, actions: &[Action]) {
    poll(fx, app);
    for a in actions {
        app.update(a.clone());
        poll(fx, app);
    }
}

fn poll(fx: &Fx, app: &mut App) {
    // A changed query (new window, new detail) is read again at once, and
    // so is a search still scanning, as the poller does.
    for _ in 0..10_000 {
        let (q, asked) = (app.query(), app.asked);
        let data = fx.store.dashboard(&q, NOW).unwrap();
        let searching = data.items.as_ref().is_some_and(|p| p.searching.is_some());
        app.update(Arrival::Polled {
            at: NOW - 400,
            asked,
            result: Ok(Box::new(data)),
        });
        if app.query() == q && app.asked == asked && !searching {
            break;
        }
    }
}

fn draw(app: &App) -> String {
    let (w, h) = app.size;
    let mut terminal = Terminal::new(TestBackend::new(w, h)).unwrap();
    terminal.draw(|f| ui::render(app, f)).unwrap();
    format!("{:?}", terminal.backend().buffer())
}

fn screen(palette: Palette, size: (u16, u16), keys: &[Intent]) -> String {
    let fx = fixture();
    let mut app = App::new(setup(palette, false), NOW);
    app.update(Arrival::Resize(size.0, size.1));
    let actions: Vec<Action> = keys.iter().cloned().map(Action::from).collect();
    drive(&fx, &mut app, &actions);
    draw(&app)
}

fn palette_name(p: Palette) -> &'static str {
    match p {
        Palette::Mono => "nocolor",
        Palette::Ansi16 => "16",
        Palette::Ansi256 => "256",
    }
}

#[test]
fn every_pane_at_both_sizes_with_and_without_colour() {
    for palette in [Palette::Ansi256, Palette::Mono] {
        for size in [(80, 24), (160, 48)] {
            for pane in Pane::ALL {
                let mut actions = vec![Intent::GoPane(pane)];
                if pane == Pane::Items {
                    // Select a failed item further down.
                    actions.extend(std::iter::repeat_n(Intent::Down, 9));
                }
                let shot = screen(palette, size, &actions);
                let name = format!(
                    "{}_{}x{}_{}",
                    pane.title().to_lowercase().replace(' ', "_"),
                    size.0,
                    size.1,
                    palette_name(palette)
                );
                insta::assert_snapshot!(name, shot);
            }
        }
    }
}

#[test]
fn sixteen_colours() {
    insta::assert_snapshot!(screen(Palette::Ansi16, (80, 24), &[]));
}

#[test]
fn item_detail_shows_payload_result_errors_and_events() {
    let shot = screen(
        Palette::Mono,
        (80, 24),
        &[
            Intent::GoPane(Pane::Items),
            Intent::Down,
            Intent::Down,
            Intent::Down,
            Intent::Open,
        ],
    );
    insta::assert_snapshot!(shot);
    // A failed item, scrolled down to its failed attempts and events.
    let scrolled = screen(
        Palette::Mono,
        (80, 24),
        &[
            Intent::GoPane(Pane::Items),
            Intent::CycleStatusBack,
            Intent::Open,
            Intent::PageDown,
        ],
    );
    insta::assert_snapshot!(scrolled);
}

/// The dead letters' hint under the table is whole at every width: the
/// long form where it fits, else the short one (it was cut mid-word at
/// 100 columns, with no `…`).
#[test]
fn the_dead_letters_hint_is_never_cut_mid_word() {
    for width in [80, 99, 100, 101, 104, 105, 106, 120, 160] {
        let shot = screen(
            Palette::Mono,
            (width, 30),
            &[Intent::GoPane(Pane::DeadLetters)],
        );
        let hint = shot
            .lines()
            .find(|l| l.contains("└ Enter open"))
            .unwrap_or_else(|| panic!("{width}: no hint\n{shot}"));
        let whole = [
            "items failed at present ─",
            "items failed at present ┘",
            "A requeue all ─",
        ];
        assert!(whole.iter().any(|w| hint.contains(w)), "{width}: {hint}");
    }
}

#[test]
fn dead_letter_class_lists_its_failed_items() {
    insta::assert_snapshot!(screen(
        Palette::Mono,
        (80, 24),
        &[Intent::GoPane(Pane::DeadLetters), Intent::Open]
    ));
}

#[test]
fn filters_status_and_search() {
    // `s` steps through the outcomes too: the items that succeeded with
    // nothing, apart.
    let empty = screen(
        Palette::Mono,
        (80, 24),
        &[
            Intent::GoPane(Pane::Items),
            Intent::CycleStatus,
            Intent::CycleStatus,
            Intent::CycleStatus,
            Intent::CycleStatus,
        ],
    );
    assert!(empty.contains("status: empty"), "{empty}");
    insta::assert_snapshot!("filters_status_empty", empty);
    insta::assert_snapshot!(screen(
        Palette::Mono,
        (80, 24),
        &[
            Intent::GoPane(Pane::Items),
            Intent::CycleStatusBack,
            Intent::StartFilter,
            Intent::Input('T'),
            Intent::Input('i'),
            Intent::Input('m'),
            Intent::Input('e'),
        ]
    ));
    insta::assert_snapshot!(screen(
        Palette::Mono,
        (80, 24),
        &[
            Intent::GoPane(Pane::Log),
            Intent::StartFilter,
            Intent::Input('f'),
            Intent::Input('a'),
            Intent::Input('i'),
            Intent::Input('l'),
            Intent::Input('e'),
            Intent::Input('d'),
            Intent::Input(','),
            Intent::Input('e'),
            Intent::Input('m'),
            Intent::Input('p'),
            Intent::Input('t'),
            Intent::Input('y'),
            Intent::Submit,
        ]
    ));
}

/// A marked item's `● ` widens the key column rather than cutting its key:
/// at 80 columns `blog-01` stays whole beside the mark (it was `● blog…`,
/// and a two-character key was `● …`, nothing of it left).
#[test]
fn a_marked_key_keeps_its_characters() {
    let shot = screen(
        Palette::Mono,
        (80, 24),
        &[Intent::GoPane(Pane::Items), Intent::ToggleMark],
    );
    assert!(shot.contains("1 marked"), "{shot}");
    assert!(shot.contains("│● blog-01 done "), "{shot}");
    assert!(shot.contains("│blog-02   done "), "{shot}");
}

/// The run log's kind filter at 80 columns shows what is typed, names a
/// kind the log has no word for (with what a word not finished may
/// become), and is not kept with one: Enter leaves it open.
#[test]
fn the_kind_filter_shows_what_is_typed_and_refuses_an_unknown_kind() {
    let typing = |word: &str, submit: bool| {
        let mut keys = vec![Intent::GoPane(Pane::Log), Intent::StartFilter];
        keys.extend(word.chars().map(Intent::Input));
        if submit {
            keys.push(Intent::Submit);
        }
        screen(Palette::Mono, (80, 24), &keys)
    };
    let partial = typing("quar", false);
    assert!(partial.contains("quar█"), "{partial}");
    assert!(partial.contains("no kind quar (quarantined?)"), "{partial}");
    let typo = typing("failed,faild", true);
    assert!(typo.contains("failed,faild█"), "still typing: {typo}");
    assert!(typo.contains("no kind faild"), "{typo}");
    let kept = typing("failed,empty", true);
    assert!(
        !kept.contains('█') && kept.contains("kinds: failed,empty"),
        "{kept}"
    );
}

#[test]
fn overlays_help_confirm_prompt() {
    insta::assert_snapshot!("help", screen(Palette::Mono, (80, 24), &[Intent::Help]));
    insta::assert_snapshot!(
        "confirm_skip",
        screen(
            Palette::Mono,
            (80, 24),
            &[
                Intent::GoPane(Pane::Items),
                Intent::Bottom,
                Intent::Up,
                Intent::SkipSelected
            ]
        )
    );
    insta::assert_snapshot!(
        "prompt_pause",
        screen(
            Palette::Mono,
            (80, 24),
            &[Intent::TogglePause, Intent::Input('d'), Intent::Input('b')]
        )
    );
}

/// The help at 80 columns gives every description whole, wrapped under
/// itself: the longer ones were cut (`c`'s "to manual (asks)" lost).
#[test]
fn the_help_wraps_what_it_cannot_fit() {
    let mut keys = vec![Intent::Help];
    keys.extend(std::iter::repeat_n(Intent::Down, 60));
    let shown = screen(Palette::Mono, (80, 24), &keys);
    assert!(
        shown.contains("stopped, to manual (asks)  (Items, Dead letters)"),
        "{shown}"
    );
    // Wrapped by the rule every text follows (the last break that fits).
    assert!(shown.contains("Filters: type, Enter keep │"), "{shown}");
    assert!(
        shown.contains("│                    · Esc clear."),
        "{shown}"
    );
    assert!(!shown.contains('…'), "{shown}");
}

#[test]
fn since_you_last_looked() {
    let fx = fixture();
    let since = fx.store.since(NOW - 12 * fixture::HOUR, NOW).unwrap();
    let mut app = App::new(setup(Palette::Mono, false), NOW);
    app.update(Arrival::Resize(80, 24));
    drive(&fx, &mut app, &[Arrival::Since(Box::new(since)).into()]);
    insta::assert_snapshot!(draw(&app));
}

#[test]
fn read_only_says_so() {
    let fx = fixture();
    let mut app = App::new(setup(Palette::Mono, true), NOW);
    app.update(Arrival::Resize(80, 24));
    drive(
        &fx,
        &mut app,
        &[
            Intent::GoPane(Pane::Items).into(),
            Intent::RequeueAll.into(),
        ],
    );
    insta::assert_snapshot!(draw(&app));
}

#[test]
fn stale_and_too_small() {
    let fx = fixture();
    let mut app = App::new(setup(Palette::Mono, false), NOW);
    app.update(Arrival::Resize(80, 24));
    drive(&fx, &mut app, &[]);
    app.update(Arrival::Tick(NOW + 40_000));
    app.update(Arrival::Polled {
        at: NOW + 40_000,
        asked: app.asked,
        result: Err(
            "no store at /srv/nightshift/nightshift.db: run `nightshift init` there first".into(),
        ),
    });
    insta::assert_snapshot!("stale", draw(&app));
    app.update(Arrival::Resize(60, 20));
    insta::assert_snapshot!("too_small", draw(&app));
}

/// Japanese labels and errors, emoji, combining marks and halfwidth kana
/// in every pane, at 80×24 and 120×40: labels whole where they fit, every
/// cut ending in `…`, wrapped text whole, columns aligned by display width.
#[test]
fn japanese_text_in_every_pane() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("nightshift.db");
    fixture::build_japanese(&db, NOW);
    let fx = Fx {
        store: Store::open(&db, Access::ReadOnly).unwrap(),
        _dir: dir,
    };
    let since = fx.store.since(NOW - 2 * fixture::HOUR, NOW).unwrap();
    for size in [(80, 24), (120, 40)] {
        let shots: Vec<(&str, Vec<Action>)> = vec![
            ("batches", vec![]),
            ("activity", vec![Intent::GoPane(Pane::Activity).into()]),
            ("items", vec![Intent::GoPane(Pane::Items).into()]),
            (
                "detail",
                vec![
                    Intent::GoPane(Pane::Items).into(),
                    Intent::Down.into(),
                    Intent::Down.into(),
                    Intent::Open.into(),
                ],
            ),
            (
                "dead_letters",
                vec![Intent::GoPane(Pane::DeadLetters).into()],
            ),
            (
                "class_items",
                vec![
                    Intent::GoPane(Pane::DeadLetters).into(),
                    Intent::Open.into(),
                ],
            ),
            ("run_log", vec![Intent::GoPane(Pane::Log).into()]),
            (
                "confirm",
                vec![
                    Intent::GoPane(Pane::Items).into(),
                    Intent::Down.into(),
                    Intent::Down.into(),
                    Intent::SkipSelected.into(),
                ],
            ),
            (
                "since",
                vec![Arrival::Since(Box::new(since.clone())).into()],
            ),
        ];
        for (name, actions) in shots {
            let mut setup = Setup::new(
                "/srv/ナイトシフト/nightshift.db",
                "box-1",
                false,
                Palette::Mono,
            );
            setup.config.batches = vec!["blogs".into()];
            let mut app = App::new(setup, NOW);
            app.update(Arrival::Resize(size.0, size.1));
            drive(&fx, &mut app, &actions);
            insta::assert_snapshot!(format!("japanese_{name}_{}x{}", size.0, size.1), draw(&app));
        }
    }
}

/// The pace says only what it knows (a fake clock: `NOW`): a run three
/// seconds old has no rate and no ETA yet, and the run that stepped down
/// beside it does not hide it; a run that has run a while has both; a held
/// or paused batch, or one with no live run, has no ETA and says why (a
/// held one until when on its own line).
#[test]
fn the_pace_says_only_what_it_knows() {
    use nightshift::model::{
        EventKind, Holder, NewEvent, NewItem, Outcome, Pause, RunState, Trigger,
    };
    use nightshift::store::Completion;
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("nightshift.db");
    let (mut s, _) = Store::create(&db).unwrap();
    let holder = Holder {
        host: "worker-1".into(),
        pid: 4242,
        pid_start: None,
    };
    let items = |n: usize| -> Vec<NewItem> {
        (0..n)
            .map(|i| NewItem {
                key: format!("k{i:02}"),
                label: format!("label {i}"),
                payload: "{}".into(),
                ..Default::default()
            })
            .collect()
    };
    // A live run started `age` ago that completed `done` items, evenly.
    let live = |s: &mut Store, batch: &str, age: i64, done: usize| {
        s.add_items(batch, &items(40), NOW - age, |_| {}).unwrap();
        let run = s
            .start_run(batch, Trigger::Manual, None, &holder, NOW - age, None)
            .unwrap();
        s.acquire_lock(
            batch,
            batch,
            &holder,
            Some(run),
            NOW + 60_000,
            NOW - age,
            &[],
            1,
        )
        .unwrap();
        let claims = s
            .claim(batch, run, done, NOW + 60_000, NOW - age)
            .unwrap()
            .unwrap();
        for (i, c) in claims.iter().enumerate() {
            let at = NOW - age + (i as i64 + 1) * age / (done as i64 + 1);
            let d = Completion {
                usage: None,
                item_id: c.item_id,
                token: c.token,
                run_id: run,
                outcome: Outcome::Done,
                result: Some("1"),
                cost: None,
                version: None,
                now: at,
            };
            assert!(
                s.complete(
                    &d,
                    &NewEvent::new(at, batch, EventKind::Done, "done").key(&c.key)
                )
                .unwrap()
            );
        }
    };
    live(&mut s, "a-young", 3_000, 3);
    let step = s
        .start_run(
            "a-young",
            Trigger::Schedule,
            None,
            &holder,
            NOW - 1_000,
            None,
        )
        .unwrap();
    s.finish_run(
        step,
        &RunEnd::new(RunState::LockHeld, "a-young: lock-held: stepped down"),
        NOW - 1_000,
    )
    .unwrap();
    live(&mut s, "b-going", 300_000, 20);
    live(&mut s, "c-held", 300_000, 20);
    s.set_hold("c-held", NOW + 4 * 60_000, Some("k07")).unwrap();
    live(&mut s, "d-paused", 300_000, 20);
    let pause = Pause {
        reason: "deploy".into(),
        by: "ops@box".into(),
        at: NOW,
    };
    s.pause_batch("d-paused", &pause).unwrap();
    s.add_items("e-idle", &items(5), NOW - 3_600_000, |_| {})
        .unwrap();
    drop(s);
    let fx = Fx {
        store: Store::open(&db, Access::ReadOnly).unwrap(),
        _dir: dir,
    };
    let mut setup = setup(Palette::Mono, false);
    setup.config.batches = Vec::new();
    let mut app = App::new(setup, NOW);
    app.update(Arrival::Resize(80, 24));
    let mut shown = Vec::new();
    drive(&fx, &mut app, &[]);
    for _ in 0..5 {
        let screen = draw(&app);
        // A row's text inside the box, without its padding.
        let row = |start: &str| {
            let line = screen
                .lines()
                .find(|l| l.contains(start))
                .unwrap_or_default();
            line.split('│')
                .nth(1)
                .unwrap_or_default()
                .trim_end()
                .to_string()
        };
        shown.push((
            row("│rate"),
            row("│last run"),
            row("│then"),
            row("HELD until"),
        ));
        drive(&fx, &mut app, &[Intent::NextBatch.into()]);
    }
    let rates: Vec<&str> = shown.iter().map(|s| s.0.as_str()).collect();
    assert_eq!(
        rates,
        [
            "rate      — last minute · ETA —",
            "rate      4.0/min last minute · 4.0/min last 5 min · ETA 5m0s",
            "rate      4.0/min last minute · 4.0/min last 5 min · no ETA: held",
            "rate      4.0/min last minute · 4.0/min last 5 min · no ETA: paused",
            "rate      0.0/min last minute · 0.0/min last hour · no ETA: no run",
        ]
    );
    assert!(shown[0].1.contains("#1 running"), "{:?}", shown[0]);
    assert!(shown[0].2.contains("#2 lock-held"), "{:?}", shown[0]);
    assert_eq!(shown[1].2, "", "no step-down: no line");
    // Until when, and why, the hold's own line says, to the second (its
    // 4m from 12:00:00, a time to come rounded up: never said nearer).
    assert!(
        shown[2]
            .3
            .trim()
            .starts_with("HELD until 12:04:00Z (in 4m)"),
        "{:?}",
        shown[2]
    );
    assert_eq!(shown[1].3, "", "no hold: no line");
}

/// A live run whose pool is held by another batch's retry-after claims
/// nothing: the batch is `held`, has no ETA, and its detail says until
/// when and by whom, as `status --short` says `held` (it said `running`
/// with an ETA). The emergency stop marks it paused everywhere, the
/// header's summary and the ETA too.
#[test]
fn a_run_held_by_its_pool_is_held_with_no_eta() {
    let (dir, mut store) = writable_fixture(true);
    let hold = nightshift::store::PoolHold {
        until: NOW + 5 * fixture::MIN,
        batch: "newsletter".into(),
        key: Some("k3".into()),
        label: None,
    };
    store.set_pool_hold("本番", &hold).unwrap();
    let mut setup = setup(Palette::Mono, false);
    setup.config.pools = vec![nightshift::store::PoolSpec {
        name: "本番".into(),
        dims: Vec::new(),
        concurrency: Some(2),
    }];
    setup
        .config
        .pool_of
        .insert("articles".into(), "本番".into());
    let mut app = App::new(setup, NOW);
    app.update(Arrival::Resize(160, 48));
    poll_at(&mut app, &store, NOW);
    let shot = draw(&app);
    let row = shot
        .lines()
        .find(|l| l.trim_start_matches([' ', '"']).starts_with("│articles "))
        .unwrap_or_default();
    assert!(row.contains("held"), "{row}\n{shot}");
    assert!(shot.contains("no ETA: held"), "{shot}");
    // (5m from 12:00:00, rounded up: it was read at the minute's middle,
    // 4m30s, `in 4m`.)
    assert!(
        shot.contains("HELD until 12:05:00Z (in 5m) by pool 本番: no call starts before"),
        "{shot}"
    );
    assert!(
        shot.contains("by a retry-after from k3 of newsletter"),
        "{shot}"
    );
    // The emergency stop: paused, in the ETA and the header's summary too.
    std::fs::write(dir.path().join("PAUSED"), "").unwrap();
    let mut data = store.dashboard(&app.query(), NOW).unwrap();
    data.emergency = Some(dir.path().join("PAUSED"));
    deliver(&mut app, data, NOW);
    let shot = draw(&app);
    assert!(shot.contains("no ETA: paused"), "{shot}");
    // Held by its pool, the header says so, not "running".
    assert!(shot.contains("…23 ▶ held ⏸ PAUSED"), "{shot}");
}

/// With no live daemon the schedule line says so, and how many fire times
/// passed unfired, instead of a next fire that will not come.
#[test]
fn a_schedule_without_a_live_daemon_says_so_and_counts_what_it_missed() {
    let (_dir, mut store) = writable_fixture(true);
    // The daemon last planned the fire of 2025-12-29 02:00 JST, and beat
    // two seconds before NOW: an hour later it is silent, three fires gone.
    let planned = NOW - 3 * 24 * fixture::HOUR + 5 * fixture::HOUR;
    store.set_next_fire("articles", Some(planned), NOW).unwrap();
    let later = NOW + fixture::HOUR;
    let mut app = App::new(setup(Palette::Mono, false), later);
    app.update(Arrival::Resize(160, 48));
    poll_at(&mut app, &store, later);
    let shot = draw(&app);
    assert!(
        shot.contains(
            "0 2 * * * Asia/Tokyo · daemon not running (last seen 1h0m ago: went silent) · 3 missed"
        ),
        "{shot}"
    );
    assert!(!shot.contains("next Fri"), "{shot}");
    // A fire time passed under a minute ago is late, not missed: a daemon
    // back now runs it (the line said nothing of it).
    let fire = NOW + 5 * fixture::HOUR; // 2026-01-02 02:00 JST
    store.set_next_fire("articles", Some(fire), NOW).unwrap();
    let mut app = App::new(setup(Palette::Mono, false), fire + 30_000);
    app.update(Arrival::Resize(160, 48));
    poll_at(&mut app, &store, fire + 30_000);
    let shot = draw(&app);
    assert!(
        shot.contains(
            "(last seen 5h0m ago: went silent) · 1 late, the latest runs once when it is back"
        ),
        "{shot}"
    );
    assert!(!shot.contains("missed"), "{shot}");
    // While it beats, the next fire.
    let mut app = App::new(setup(Palette::Mono, false), NOW);
    app.update(Arrival::Resize(160, 48));
    poll_at(&mut app, &store, NOW);
    let shot = draw(&app);
    assert!(
        shot.contains("0 2 * * * Asia/Tokyo · next Fri 2026-01-02 02:00 JST"),
        "{shot}"
    );
    assert!(!shot.contains("skipped while paused"), "{shot}");
    // Paused: the daemon records that fire skipped, and the line says so.
    let pause = nightshift::model::Pause {
        reason: "deploying".into(),
        by: "ops".into(),
        at: NOW,
    };
    store.pause_batch("articles", &pause).unwrap();
    poll_at(&mut app, &store, NOW);
    let shot = draw(&app);
    assert!(
        shot.contains("next Fri 2026-01-02 02:00 JST (in 5h0m) · skipped while paused"),
        "{shot}"
    );
}

/// A next fire with seconds (a six-field schedule) is said to the second
/// by the schedule line and the waiting line alike: they said the minute
/// before it, and the minute after.
#[test]
fn a_fire_with_seconds_is_said_to_the_second() {
    let (_dir, mut store) = writable_fixture(false);
    let daemon = nightshift::model::Daemon {
        token: "d".into(),
        holder: nightshift::model::Holder {
            host: "worker-1".into(),
            pid: 4242,
            pid_start: None,
        },
        started_at: NOW - fixture::HOUR,
        beat_at: NOW - 2_000,
        stopped_at: None,
        stopping_at: None,
        batches: vec!["articles".into()],
    };
    store.daemon_started(&daemon, NOW).unwrap();
    // 2026-01-02 02:00:05 JST.
    let next = NOW + 5 * fixture::HOUR + 5_000;
    store.set_next_fire("articles", Some(next), NOW).unwrap();
    let mut setup = setup(Palette::Mono, false);
    setup.config.schedules.insert(
        "articles".to_string(),
        BatchSchedule {
            schedule: Schedule::parse("5 0 2 * * *").unwrap(),
            tz: chrono_tz::Asia::Tokyo,
            catch_up: None,
        },
    );
    let mut app = App::new(setup, NOW);
    app.update(Arrival::Resize(160, 48));
    poll_at(&mut app, &store, NOW);
    let shot = draw(&app);
    assert!(shot.contains("next Fri 2026-01-02 02:00:05 JST"), "{shot}");
    assert!(
        shot.contains("for the schedule's next fire at 17:00:05Z"),
        "{shot}"
    );
}

/// A schedule edited and not reloaded: the schedule line gives the live
/// daemon's schedule and next fire, and says the file differs (it gave
/// the file's schedule beside the daemon's next fire).
#[test]
fn an_edited_schedule_not_reloaded_is_said_as_the_live_daemon_fires_it() {
    let (_dir, mut store) = writable_fixture(true);
    let rule = nightshift::model::FireRule {
        schedule: "0 2 * * *".into(),
        timezone: "Asia/Tokyo".into(),
    };
    // 2026-01-02 02:00 JST.
    let next = NOW + 5 * fixture::HOUR;
    store
        .set_fire_plan("articles", &rule, Some(next), NOW)
        .unwrap();
    let mut setup = setup(Palette::Mono, false);
    setup.config.schedules.insert(
        "articles".to_string(),
        BatchSchedule {
            schedule: Schedule::parse("*/5 * * * * *").unwrap(),
            tz: chrono_tz::UTC,
            catch_up: None,
        },
    );
    let mut app = App::new(setup, NOW);
    app.update(Arrival::Resize(160, 48));
    poll_at(&mut app, &store, NOW);
    let shot = draw(&app);
    assert!(
        shot.contains("0 2 * * * Asia/Tokyo · next Fri 2026-01-02 02:00 JST (in 5h0m) · the file's schedule differs"),
        "{shot}"
    );
    assert!(!shot.contains("*/5"), "{shot}");
}

/// The batch detail says why its open items wait, in the words `status`
/// uses: here the batch is paused, so everything that could run waits for
/// that, beside the quarantined items that wait for a person.
#[test]
fn the_batch_detail_says_why_items_wait() {
    let (_dir, mut store) = writable_fixture(false);
    let pause = nightshift::model::Pause {
        reason: "プロンプトを直す".into(),
        by: "ops@box-1".into(),
        at: NOW - 60_000,
    };
    store.pause_batch("articles", &pause).unwrap();
    let mut app = App::new(setup(Palette::Mono, false), NOW);
    app.update(Arrival::Resize(160, 48));
    poll_at(&mut app, &store, NOW);
    let shot = draw(&app);
    assert!(shot.contains("waiting   "), "{shot}");
    assert!(shot.contains("wait: the batch is paused"), "{shot}");
    insta::assert_snapshot!(shot);
}

/// An item's priority and not-before time, in its detail; the batch
/// detail says it waits, not due, until that time.
#[test]
fn priority_and_not_before_are_shown() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("nightshift.db");
    let (mut store, _) = Store::create(&db).unwrap();
    let at = NOW + 30 * 60_000 + 5_000;
    let urgent = nightshift::model::NewItem {
        key: "urgent".into(),
        label: "urgent".into(),
        payload: "{}".into(),
        priority: 7,
        not_before: Some(at),
        written_key: None,
    };
    store
        .add_items("articles", &[urgent], NOW - 1_000, |_| {})
        .unwrap();
    let fx = Fx { _dir: dir, store };
    let mut app = App::new(setup(Palette::Mono, false), NOW);
    app.update(Arrival::Resize(160, 48));
    drive(&fx, &mut app, &[]);
    let batch = draw(&app);
    let clock = nightshift::util::time::utc_clock(at, NOW);
    assert!(
        batch.contains(&format!("1 pending, not before {clock}")),
        "{batch}"
    );
    let actions: Vec<Action> = [Intent::GoPane(Pane::Items), Intent::Open]
        .into_iter()
        .map(Action::from)
        .collect();
    drive(&fx, &mut app, &actions);
    let detail = draw(&app);
    assert!(detail.contains("priority 7"), "{detail}");
    // 30m5s from 12:00:00, rounded up (`tui::format::ago`; it was read
    // at the minute's middle, `in 29m`, half a minute and more early).
    assert!(detail.contains("not before in 31m"), "{detail}");
}

/// A popup drawn over Japanese text keeps its left border: a wide
/// character starting just left of it would otherwise be drawn by the
/// terminal over the border (the screen as a terminal shows it: a wide
/// character hides the cell after it).
#[test]
fn a_popup_over_wide_characters_keeps_its_border() {
    use nightshift::model::NewItem;
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("nightshift.db");
    let (mut s, _) = Store::create(&db).unwrap();
    let items: Vec<NewItem> = (0..20)
        .map(|i| NewItem {
            key: format!("記事-{i:03}"),
            label: format!("ブログ：技術記事 第{i}回"),
            payload: "{}".into(),
            ..Default::default()
        })
        .collect();
    s.add_items("記事の投稿", &items, NOW - 1_000, |_| {})
        .unwrap();
    let fx = Fx {
        store: s,
        _dir: dir,
    };
    for overlay in [Intent::Help, Intent::SkipSelected] {
        let mut app = App::new(Setup::new("/srv/n.db", "box-1", false, Palette::Mono), NOW);
        app.update(Arrival::Resize(80, 24));
        drive(
            &fx,
            &mut app,
            &[Intent::GoPane(Pane::Items).into(), overlay.clone().into()],
        );
        let mut terminal = Terminal::new(TestBackend::new(80, 24)).unwrap();
        terminal.draw(|f| ui::render(&app, f)).unwrap();
        let buf = terminal.backend().buffer();
        // Each row as shown, by column: what starts there.
        let shown = |y: u16| -> Vec<String> {
            let mut cols = Vec::new();
            let mut x = 0;
            while x < 80 {
                let sym = buf[(x, y)].symbol().to_string();
                let w = nightshift::util::text::width(&sym).max(1) as u16;
                cols.push(sym);
                cols.extend((1..w).map(|_| String::new()));
                x += w;
            }
            cols
        };
        let top = (0..24)
            .find(|&y| shown(y)[2] == "┌")
            .expect("a popup at column 2");
        let bottom = (top + 1..24).find(|&y| shown(y)[2] == "└").unwrap();
        for y in top + 1..bottom {
            assert_eq!(
                shown(y)[2],
                "│",
                "{overlay:?}, row {y}: {:?}",
                shown(y).concat()
            );
        }
    }
}

/// A configured batch with no rows in the store yet: its Items pane says
/// it has none and how to add some, where it said "loading…" for as long
/// as the dashboard stayed open; with a filter, that nothing matches.
#[test]
fn a_configured_batch_with_no_items_says_so() {
    let fx = fixture();
    let mut app = App::new(setup(Palette::Mono, false), NOW);
    app.update(Arrival::Resize(80, 24));
    drive(&fx, &mut app, &[]);
    for _ in 0..10 {
        if app.batch.as_deref() == Some("newsletter") {
            break;
        }
        drive(&fx, &mut app, &[Intent::NextBatch.into()]);
    }
    assert_eq!(app.batch.as_deref(), Some("newsletter"));
    drive(&fx, &mut app, &[Intent::GoPane(Pane::Items).into()]);
    let shot = draw(&app);
    assert!(
        shot.contains("no items: `nightshift add newsletter FILE` adds some")
            && shot.contains("Items · newsletter · status: all · none")
            && !shot.contains("loading…"),
        "{shot}"
    );
    drive(&fx, &mut app, &[Intent::CycleStatus.into()]);
    let shot = draw(&app);
    assert!(
        shot.contains("no items match (s status · / filter · Esc back)"),
        "{shot}"
    );
}

/// A batch the file schedules that the live daemon leaves out (the file
/// edited after the daemon read it): the schedule line said `daemon not
/// running (never started)` while a daemon ran. It says the live daemon
/// does not schedule it, and how to have it fire it.
#[test]
fn a_schedule_the_live_daemon_leaves_out_says_so_not_that_none_runs() {
    let (_dir, store) = writable_fixture(true);
    let mut setup = setup(Palette::Mono, false);
    setup.config.schedules.insert(
        "newsletter".to_string(),
        BatchSchedule {
            schedule: Schedule::parse("0 3 * * *").unwrap(),
            tz: chrono_tz::Asia::Tokyo,
            catch_up: None,
        },
    );
    let mut app = App::new(setup, NOW);
    app.update(Arrival::Resize(160, 48));
    poll_at(&mut app, &store, NOW);
    let mut shot = String::new();
    for _ in 0..4 {
        shot = draw(&app);
        if shot.contains("┌ newsletter ") {
            break;
        }
        app.update(Action::from(Intent::Down));
        poll_at(&mut app, &store, NOW);
    }
    let line = shot
        .lines()
        .find(|l| l.contains("│schedule "))
        .unwrap_or_default();
    assert!(line.contains("0 3 * * * Asia/Tokyo"), "{shot}");
    assert!(!line.contains("daemon not running"), "{line}");
    assert!(line.contains("SIGHUP"), "{line}");
}

/// A daemon killed (`kill -9`) said as `status` says it: the schedule line
/// said `daemon not running (last seen 2s ago)`, the same as for a daemon
/// stopped on purpose, where `status` says `is gone (killed, or crashed)`.
#[test]
fn a_killed_daemon_is_said_gone_not_only_not_running() {
    let (_dir, mut store) = writable_fixture(true);
    // The fixture's daemon stopped, and one on this host since, its
    // process gone.
    let stopped = nightshift::model::Daemon {
        token: "fixture-daemon".into(),
        holder: nightshift::model::Holder {
            host: "worker-1".into(),
            pid: 4242,
            pid_start: None,
        },
        started_at: NOW - 50 * fixture::HOUR,
        beat_at: NOW - 10_000,
        stopped_at: Some(NOW - 10_000),
        stopping_at: None,
        batches: vec!["articles".into(), "reports".into()],
    };
    store.daemon_beat(&stopped, NOW).unwrap();
    let killed = nightshift::model::Daemon {
        token: "killed".into(),
        holder: nightshift::model::Holder {
            host: nightshift::util::identity::host(),
            pid: 4_000_000,
            pid_start: None,
        },
        started_at: NOW - 5_000,
        beat_at: NOW - 2_000,
        stopped_at: None,
        ..stopped
    };
    store.daemon_beat(&killed, NOW).unwrap();
    let mut app = App::new(setup(Palette::Mono, false), NOW);
    app.update(Arrival::Resize(160, 48));
    poll_at(&mut app, &store, NOW);
    let shot = draw(&app);
    let line = shot
        .lines()
        .find(|l| l.contains("│schedule "))
        .unwrap_or_default();
    assert!(
        line.contains("daemon not running (last seen 2s ago: killed, or crashed)"),
        "{line}"
    );
}
