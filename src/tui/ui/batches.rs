//! Pane 1: every batch with counts, progress and rate; below, the selected
//! batch in full (rate and ETA, spend, last run, schedule or pause, lock),
//! and on a tall screen its activity charts.

use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Cell, Paragraph, Row, Table};

use super::{bar, clean, num, pane_block, placeholder, wrap_cut};
use crate::model::pace::{self, Eta, Pace};
use crate::model::{BatchInfo, DaemonState, Millis, Run, RunSeen, RunState, Seat};
use crate::tui::app::App;
use crate::tui::theme::Role;
use crate::util::noun;
use crate::util::time::compact;

/// The selected batch's pace (rates and ETA) from its poll.
fn pace_of(app: &App, info: &BatchInfo) -> Pace {
    let view = app.batch_view(&info.name);
    pace::pace(
        view.map_or(&[][..], |v| v.minutes.as_slice()),
        app.now,
        view.map_or(app.now, |v| v.created_at),
        info.activity(app.data.emergency.is_some(), held_until(app, info)),
        info.counts.to_do(),
    )
}

/// The retry-after of the batch's pool, while it holds.
fn pool_hold<'a>(app: &'a App, info: &BatchInfo) -> Option<&'a crate::store::PoolHold> {
    app.pool_of(&info.name)
        .and_then(|v| v.hold.as_ref())
        .filter(|h| h.until > app.now)
}

/// Until when no call of the batch may start, by every hold the dashboard
/// read: its own retry-after, its pool's, a budget reached (read for the
/// selected batch).
fn held_until(app: &App, info: &BatchInfo) -> Option<Millis> {
    [
        info.held(app.now).map(|h| h.until),
        pool_hold(app, info).map(|h| h.until),
        crate::runner::budget::held_until(&app.budget_states(info)),
    ]
    .into_iter()
    .flatten()
    .max()
}

/// Every hold on the batch now, in the words `status --short` marks it
/// with: `held` (its retry-after, its pool's), `budget` (a budget
/// reached), or both (one hid the other).
pub(super) fn hold_words(app: &App, info: &BatchInfo) -> Option<String> {
    let held = info.held(app.now).is_some() || pool_hold(app, info).is_some();
    let budget = crate::runner::budget::held_until(&app.budget_states(info)).is_some();
    let words: Vec<&str> = [(held, "held"), (budget, "budget")]
        .into_iter()
        .filter_map(|(on, word)| on.then_some(word))
        .collect();
    (!words.is_empty()).then(|| words.join(" "))
}

/// `12/min`, `1.5/min`, `2,339/min`, or `—` while the window is too short
/// to tell; whole rates written by `count`, as the counts beside them
/// (grouped by thousands, or shortened where the table has no room).
fn rate_text(r: Option<f64>, count: fn(i64) -> String) -> String {
    match r {
        None => "—".into(),
        Some(r) if r >= 10.0 => format!("{}/min", count(r.round() as i64)),
        Some(r) => format!("{r:.1}/min"),
    }
}

/// `ETA 5m0s`, or why there is none; with nothing pending, what still
/// waits (`failed`: both tiers).
fn eta_text(eta: Eta, failed: i64) -> String {
    match eta {
        Eta::In(ms) => format!("ETA {}", compact((ms / 1000).max(0) as u64)),
        Eta::Unknown => "ETA —".into(),
        Eta::Paused => "no ETA: paused".into(),
        // Until when, and why, the hold's own line says.
        Eta::Held { .. } => "no ETA: held".into(),
        Eta::NotRunning => "no ETA: no run".into(),
        Eta::Stopping => "no ETA: stopping".into(),
        Eta::NothingLeft if failed > 0 => format!("nothing pending ({} failed)", num(failed)),
        Eta::NothingLeft => "nothing left".into(),
    }
}

pub fn render(app: &App, f: &mut Frame, area: Rect) {
    let names = app.batch_names();
    let table_rows = table_rows(names.len(), area.height);
    let first = app
        .batch_nav
        .sel
        .saturating_sub(table_rows.saturating_sub(1));
    let mut title = vec![Span::styled(
        "Batches",
        app.setup.palette.style(Role::Title),
    )];
    // Not all of them fit: which are shown, as the item lists say it.
    if names.len() > table_rows {
        title.push(Span::raw(format!(
            " · {}–{} of {}",
            first + 1,
            first + table_rows,
            names.len()
        )));
    }
    let block = pane_block(app, area, title);
    if names.is_empty() {
        placeholder(app, f, area, block, &super::empty_text(app, ""));
        return;
    }
    let table_rows = table_rows as u16;
    let info = app.selected_info();
    // The detail may take every row below the table, less its borders.
    let room = area.height.saturating_sub(table_rows + 3 + 2) as usize;
    let lines = info
        .as_ref()
        .map(|i| detail_lines(app, i, area.width, room))
        .unwrap_or_default();
    // A long line (a schedule's missed fires, who paused and why, a crash's
    // reason) wraps into rows left free: those the activity below does not
    // need, or, with no room for it, every row the detail's box takes.
    let spare = if room >= lines.len() + ACTIVITY_ROWS as usize {
        room - ACTIVITY_ROWS as usize
    } else {
        room
    };
    let lines = super::wrap_lines(lines, (area.width as usize).saturating_sub(2), spare, LABEL);
    let [top, rest] =
        Layout::vertical([Constraint::Length(table_rows + 3), Constraint::Fill(1)]).areas(area);
    let detail_rows = lines.len() as u16 + 2;
    // What room is left shows the selected batch's activity; too little
    // for it, the detail's box takes it rather than leave rows unframed.
    let [middle, bottom] = if rest.height.saturating_sub(detail_rows) >= ACTIVITY_ROWS {
        Layout::vertical([Constraint::Length(detail_rows), Constraint::Fill(1)]).areas(rest)
    } else {
        [rest, Rect::default()]
    };
    table(app, f, top, block, &names, (first, table_rows as usize));
    if let Some(info) = &info {
        let block = pane_block(
            app,
            area,
            vec![Span::styled(
                clean(&info.name, 60),
                app.setup.palette.style(Role::Title),
            )],
        );
        f.render_widget(Paragraph::new(lines).block(block), middle);
    }
    if bottom.height >= ACTIVITY_ROWS {
        super::activity::render(app, f, bottom);
    }
}

/// The batches table's columns.
const HEADER: [&str; 8] = [
    "BATCH",
    "PENDING",
    "CLAIMED",
    "FINISHED",
    "FAILED r·m",
    "PROGRESS",
    "RATE",
    "STATE",
];

/// The fewest rows the activity below the detail is drawn in.
const ACTIVITY_ROWS: u16 = 6;

/// Rows of the batch table for `n` batches in a pane `height` rows tall:
/// every batch up to six; more while the rest of the pane keeps room for
/// a detail of about eight lines and the activity below it (at 120×40
/// twenty batches fit, where ten did only from 43 rows on).
fn table_rows(n: usize, height: u16) -> usize {
    const DETAIL: u16 = 8;
    let spare = height.saturating_sub(3 + DETAIL + 2 + ACTIVITY_ROWS) as usize;
    n.min(spare.max(6))
}

/// Cells of the detail's labels on the left (`progress`, `waiting`, ...).
const LABEL: usize = 10;

/// The narrowest the name column gets before counts are shortened.
const MIN_NAME: usize = 12;

fn table(
    app: &App,
    f: &mut Frame,
    area: Rect,
    block: ratatui::widgets::Block<'_>,
    names: &[String],
    (top, visible): (usize, usize),
) {
    let p = app.setup.palette;
    let sel = app.batch_nav.sel;
    // Pending, claimed, finished and failed add up to the batch (`Counts`).
    let header = Row::new(HEADER).style(p.style(Role::Dim));
    let bar_width = if area.width >= 120 { 20 } else { 5 };
    let shown: Vec<(usize, &String)> = names.iter().enumerate().skip(top).take(visible).collect();
    // Each row's cells after the name (see `count_columns`).
    let cells = |count: fn(i64) -> String| -> Vec<[String; 7]> {
        shown
            .iter()
            .map(|(_, name)| {
                let view = app.batch_view(name);
                let c = view.map(|v| v.info.counts).unwrap_or_default();
                let rate = view.and_then(|v| pace_of(app, &v.info).last_minute);
                let state = match view.map(|v| &v.info) {
                    Some(i) => state(i, app.data.emergency.is_some(), held_until(app, i)).0,
                    None => "idle",
                };
                [
                    count(c.pending),
                    count(c.claimed),
                    count(c.finished()),
                    format!(
                        "{} ({}·{})",
                        count(c.failed()),
                        count(c.retry),
                        count(c.manual)
                    ),
                    format!(
                        "{} {:>3}%",
                        bar(c.progress(), bar_width),
                        c.percent().unwrap_or(0)
                    ),
                    rate_text(rate, count),
                    state.to_string(),
                ]
            })
            .collect()
    };
    let (name_width, widths, texts) = super::count_columns(
        (area.width as usize).saturating_sub(2),
        [7, 7, 8, 11, bar_width + 5, 8, 7],
        MIN_NAME,
        cells,
    );
    let rows: Vec<Row> = shown
        .iter()
        .zip(&texts)
        .map(|(&(i, name), texts)| {
            let view = app.batch_view(name);
            let c = view.map(|v| v.info.counts).unwrap_or_default();
            let role = match view.map(|v| &v.info) {
                Some(info) => state(info, app.data.emergency.is_some(), held_until(app, info)).1,
                None => Role::Dim,
            };
            let cell = |k: usize| Cell::from(texts[k].clone());
            let failed = if c.failed() > 0 {
                Role::Fail
            } else {
                Role::Normal
            };
            let row = Row::new(vec![
                Cell::from(clean(name, name_width)),
                cell(0),
                cell(1),
                cell(2).style(p.style(Role::Ok)),
                cell(3).style(p.style(failed)),
                cell(4),
                cell(5),
                cell(6).style(p.style(role)),
            ]);
            if i == sel {
                row.style(p.style(Role::Selected))
            } else {
                row
            }
        })
        .collect();
    let widths: Vec<Constraint> = std::iter::once(name_width)
        .chain(widths)
        .map(|w| Constraint::Length(w as u16))
        .collect();
    f.render_widget(Table::new(rows, widths).header(header).block(block), area);
}

/// The batch's state in a word: a dead runner first (it needs a human),
/// then paused (by its flag, or every batch by the emergency stop), held
/// (a retry-after, its pool's, a budget reached: `held`), running, idle.
fn state(info: &BatchInfo, emergency: bool, held: Option<Millis>) -> (&'static str, Role) {
    match info.dead_runner() {
        Some(dead @ "crashed") => (dead, Role::Fail),
        _ if emergency => ("paused", Role::Fail),
        _ if info.pause.is_some() => ("paused", Role::Warn),
        _ if held.is_some() => ("held", Role::Warn),
        _ if info.stop_asked_by().is_some() => ("stopping", Role::Warn),
        _ if info.running() => ("running", Role::Accent),
        Some(dead) => (dead, Role::Fail),
        None => ("idle", Role::Dim),
    }
}

/// The selected batch's lines, in `rows` rows where it can (a line that
/// has no more room is cut where it is drawn).
fn detail_lines(app: &App, info: &BatchInfo, area_width: u16, rows: usize) -> Vec<Line<'static>> {
    let p = app.setup.palette;
    let now = app.now;
    let c = &info.counts;
    let label = |s: &str| Span::styled(format!("{s:<LABEL$}"), p.style(Role::Dim));
    let mut lines = Vec::new();
    // The counts beside the bar are the point: the bar gets what is left.
    let width = (area_width as usize).saturating_sub(70).clamp(8, 50);
    lines.push(Line::from(vec![
        label("progress"),
        Span::styled(bar(c.progress(), width), p.style(Role::Ok)),
        Span::raw(format!(
            " {:>3}%  {}/{} finished: {} done · ",
            c.percent().unwrap_or(0),
            num(c.finished()),
            num(c.total()),
            num(c.done),
        )),
        Span::styled(
            format!("{} empty", num(c.empty)),
            if c.empty > 0 {
                p.style(Role::Warn)
            } else {
                p.style(Role::Normal)
            },
        ),
        Span::raw(format!(" · {} skipped", num(c.skipped))),
    ]));
    let pace = pace_of(app, info);
    lines.push(Line::from(vec![
        label("rate"),
        Span::raw(format!(
            "{} {}{} · {}",
            rate_text(pace.last_minute, num),
            pace.minute_label(),
            // A batch younger than a minute has no hour figure of its own.
            pace.hour_label()
                .map(|hour| format!(" · {} {hour}", rate_text(pace.last_hour, num)))
                .unwrap_or_default(),
            eta_text(pace.eta, c.failed())
        )),
    ]));
    if let Some(run) = &info.last_run {
        if run.counts.cost > 0.0 {
            let which = if run.state == RunState::Running {
                "this run"
            } else {
                "last run"
            };
            lines.push(Line::from(vec![
                label("spend"),
                Span::raw(format!(
                    "{} {which} (#{})",
                    crate::util::money::money(run.counts.cost),
                    run.id
                )),
            ]));
        }
        let seen = info.last_run_seen().unwrap_or(RunSeen::Stored(run.state));
        lines.push(run_line(app, run, seen, label("last run")));
    } else {
        let never = if info.stepped_down.is_some() {
            "none that did work"
        } else {
            "never run"
        };
        lines.push(Line::from(vec![
            label("last run"),
            Span::styled(never, p.style(Role::Dim)),
        ]));
    }
    // `budget $12.40 of $20.00 today, resets 00:00Z` per budget.
    for s in app.budget_states(info) {
        let role = if s.reached { Role::Warn } else { Role::Dim };
        lines.push(Line::from(vec![
            label("budget"),
            Span::styled(clean(&s.describe(now), 200), p.style(role)),
        ]));
    }
    // A run that stepped down does not hide the one that did work; a
    // recent one is said below it.
    if let Some(run) = info.recent_step_down(now) {
        lines.push(run_line(
            app,
            run,
            RunSeen::Stored(run.state),
            label("then"),
        ));
    }
    lines.push(schedule_line(app, info, label("schedule")));
    if let Some(pause) = &info.pause {
        lines.push(Line::from(vec![
            label(""),
            Span::styled(
                format!(
                    "PAUSED — {} ({}, {})",
                    clean(&pause.reason, 200),
                    clean(&pause.by, 80),
                    super::ago(pause.at, now)
                ),
                p.style(Role::Warn),
            ),
        ]));
    }
    let own = info.held(now);
    let pooled = pool_hold(app, info);
    // One answer holds the batch and its pool alike: said once, as its
    // pool's (the longer word: `unpause` lifts the batch's alone).
    let one = matches!((own, pooled), (Some(h), Some(p))
        if h.until == p.until && h.key == p.key && p.batch == info.name);
    let asker = |key: Option<&str>, item_label: Option<&str>, batch: &str| {
        let cells = super::key_width(area_width);
        super::hold_asker(key, item_label, batch, Some(&info.name), cells)
    };
    let mut holds = Vec::new();
    if let Some(hold) = own.filter(|_| !one) {
        let from = asker(hold.key.as_deref(), hold.label.as_deref(), &info.name);
        holds.push((hold.until, String::new(), from));
    }
    if let Some(hold) = pooled {
        let pool = app
            .setup
            .config
            .pool_of
            .get(&info.name)
            .cloned()
            .unwrap_or_default();
        let from = asker(hold.key.as_deref(), hold.label.as_deref(), &hold.batch);
        holds.push((hold.until, format!(" by pool {}", clean(&pool, 40)), from));
    }
    for (until, by, from) in holds {
        for text in [
            format!(
                "HELD until {} ({}){by}: no call starts before",
                crate::util::time::utc_clock(until, now),
                super::ago(until, now)
            ),
            format!("by a retry-after from {from}"),
        ] {
            lines.push(Line::from(vec![
                label(""),
                Span::styled(text, p.style(Role::Warn)),
            ]));
        }
    }
    lines.push(match info.lock() {
        Some(l) => {
            let seat = info.runners.seats.first().copied().unwrap_or(Seat::Live);
            let (left, role) = match seat {
                Seat::Live if l.expires_at >= now => (
                    format!("{} left", compact(((l.expires_at - now) / 1000) as u64)),
                    Role::Accent,
                ),
                Seat::Live => ("past its expiry; its process runs".into(), Role::Accent),
                Seat::Crashed => ("crashed: its process is gone; not held".into(), Role::Fail),
                Seat::Silent { since } => (
                    format!(
                        "expired, holder silent since {}Z ({})",
                        super::clock(since, now),
                        super::ago(since, now)
                    ),
                    Role::Fail,
                ),
            };
            let run = l.run_id.map(|r| format!(" · run #{r}")).unwrap_or_default();
            let more = match info.locks.len() {
                0 | 1 => String::new(),
                n => format!(" · +{} more runners", n - 1),
            };
            let left = if seat.is_live() {
                Span::raw(format!(" · {left}"))
            } else {
                Span::styled(format!(" · {left}"), p.style(role))
            };
            let stopping = match info.stop_asked_by() {
                Some(by) => Span::styled(
                    format!(" · stopping (asked by {})", clean(by, 40)),
                    p.style(Role::Warn),
                ),
                None => Span::raw(""),
            };
            Line::from(vec![
                label("lock"),
                Span::styled(clean(&l.holder.to_string(), 80), p.style(role)),
                Span::raw(run),
                left,
                Span::raw(more),
                stopping,
            ])
        }
        None => Line::from(vec![
            label("lock"),
            Span::styled("free (no run)", p.style(Role::Dim)),
        ]),
    });
    if info.runners.orphaned() > 0 {
        let n = info.runners.orphaned();
        lines.push(Line::from(vec![
            label("orphaned"),
            Span::styled(
                format!(
                    "{} {}, taken back by the next run{}",
                    num(n),
                    noun::of(n, "claimed item"),
                    info.runners
                        .orphans_fate(app.setup.config.max_attempts_of(&info.name))
                ),
                p.style(Role::Warn),
            ),
        ]));
    }
    let waiting_at = lines.len();
    if let Some(fire) = crate::schedule::fire_seen(info, &app.data.daemons, now) {
        let why = fire
            .reason
            .as_deref()
            .map(|r| format!(": {}", clean(r, 120)))
            .unwrap_or_default();
        lines.push(Line::from(vec![
            label("last fire"),
            Span::raw(format!(
                "{} {}{why}",
                super::ago(fire.at, now),
                clean(&fire.outcome, 40)
            )),
        ]));
    }
    if let Some(text) = waiting_text(app, info) {
        // Every reason is read: wrapped under its label into the rows the
        // other lines leave, cut with `…` only past the last of them.
        let width = (area_width as usize).saturating_sub(2 + LABEL);
        let room = rows.saturating_sub(lines.len());
        let wrapped = wrap_cut(&text, width, room).into_iter().enumerate();
        let waiting = wrapped.map(|(i, l)| {
            let head = label(if i == 0 { "waiting" } else { "" });
            Line::from(vec![head, Span::raw(l)])
        });
        lines.splice(waiting_at..waiting_at, waiting);
    }
    lines
}

/// Why the selected batch's open items wait (the decision `status` and
/// `show` speak, `model::waiting`), once its retry tier has been read.
fn waiting_text(app: &App, info: &BatchInfo) -> Option<String> {
    use crate::model::waiting::{describe_grouped, waiting};
    let list = waiting(&app.holding(info)?, app.now);
    (!list.is_empty()).then(|| describe_grouped(&list, app.now))
}

/// `#7 ok · schedule · 5m0s ago · articles: 40 done, …`: the run's state
/// as it is (`seen`: crashed or silent before the store says so, and why).
fn run_line(app: &App, run: &Run, seen: RunSeen, label: Span<'static>) -> Line<'static> {
    let p = app.setup.palette;
    let summary = seen
        .why_aged(app.now, super::ago)
        .or_else(|| run.summary.clone())
        .unwrap_or_else(|| "in progress".into());
    let role = match seen {
        RunSeen::Crashed { .. } | RunSeen::Silent { .. } => Role::Fail,
        RunSeen::Stored(RunState::Failed | RunState::Crashed | RunState::Aborted) => Role::Fail,
        RunSeen::Stored(RunState::Running) => Role::Accent,
        RunSeen::Stored(RunState::Ok) => Role::Ok,
        RunSeen::Stored(_) => Role::Warn,
    };
    // Why it stopped early, beside a state that does not say it (`ok,
    // max_duration reached`): a summary cut at the pane's edge loses it.
    let note = run
        .stop_note(seen)
        .map(|n| format!(", {n}"))
        .unwrap_or_default();
    Line::from(vec![
        label,
        Span::styled(
            format!("#{} {}{note}", run.id, seen.as_str()),
            p.style(role),
        ),
        Span::styled(
            format!(
                " · {} · {} · ",
                run.trigger,
                super::ago(run.started_at, app.now)
            ),
            p.style(Role::Dim),
        ),
        Span::raw(clean(&summary, 300)),
    ])
}

fn schedule_line(app: &App, info: &BatchInfo, label: Span<'static>) -> Line<'static> {
    let p = app.setup.palette;
    let Some(seen) = app.schedule_seen(info) else {
        let stored = info.next_fire.map(|t| {
            format!(
                "next fire {}Z ({})",
                super::clock(t, app.now),
                super::ago(t, app.now)
            )
        });
        return Line::from(vec![
            label,
            Span::styled(
                stored.unwrap_or_else(|| "no schedule".into()),
                p.style(Role::Dim),
            ),
        ]);
    };
    let tz = seen.rule.tz;
    let head = Span::raw(format!(
        "{} {} · ",
        clean(&seen.rule.schedule.expr, 60),
        tz.name()
    ));
    if !seen.live {
        // Nothing fires: say so, and what was missed, not a next fire.
        let daemon = match (seen.daemon, seen.leaves_out) {
            (Some(d), _) if d.live() => format!(
                "daemon stopping (asked {}): no more fires",
                super::ago(d.daemon.stopping_at.unwrap_or(app.now), app.now)
            ),
            (_, Some(other)) => format!(
                "the live daemon ({}) leaves it out: SIGHUP it to take the file's schedule",
                other.daemon.holder
            ),
            // How it ended, as `status` says it: one killed is not one
            // stopped on purpose.
            (Some(d), None) => format!(
                "daemon not running (last seen {}{})",
                super::ago(d.last_seen(), app.now),
                match d.state {
                    DaemonState::Crashed => ": killed, or crashed",
                    DaemonState::Silent => ": went silent",
                    DaemonState::Stopped | DaemonState::Live => "",
                }
            ),
            (None, None) => "daemon not running (never started)".to_string(),
        };
        let missed = match seen.overdue {
            Some(o) => format!(
                " · {}{} missed{}",
                o.count,
                if o.more { "+" } else { "" },
                if o.catch_up.is_some() {
                    ", the latest caught up when it starts"
                } else {
                    ""
                }
            ),
            None => String::new(),
        };
        // Not missed yet: a daemon back now runs the latest once for them.
        let late = seen.late.map_or_else(String::new, |l| {
            format!(" · {} late, the latest runs once when it is back", l.count)
        });
        return Line::from(vec![
            label,
            head,
            Span::styled(format!("{daemon}{missed}{late}"), p.style(Role::Fail)),
        ]);
    }
    let next = seen
        .next
        .map(|t| {
            let local = t.with_timezone(&tz);
            let clock = crate::util::time::clock_format(chrono::Timelike::second(&local));
            format!(
                "next {} ({})",
                local.format(&format!("%a %Y-%m-%d {clock} %Z")),
                super::ago(t.timestamp_millis(), app.now)
            )
        })
        .unwrap_or_else(|| "never fires again".into());
    // The live daemon fires what it read: the file's edit waits for a
    // reload, and the line says so.
    let differs = seen.config_differs.then(|| {
        Span::styled(
            " · the file's schedule differs: SIGHUP the daemon to apply it".to_string(),
            p.style(Role::Warn),
        )
    });
    // A paused batch's fires are recorded skipped: the time is when the
    // next one is skipped, not when it runs.
    let next = if info.pause.is_some() || app.data.emergency.is_some() {
        Span::styled(
            format!("{next} · skipped while paused"),
            p.style(Role::Warn),
        )
    } else {
        Span::styled(next, p.style(Role::Accent))
    };
    let mut spans = vec![label, head, next];
    spans.extend(differs);
    Line::from(spans)
}

#[cfg(test)]
mod tests {
    /// Every batch up to six; more where the pane has rows to spare (at
    /// 120×40 seven batches were cut to six with twenty rows free).
    #[test]
    fn the_table_shows_as_many_batches_as_leave_room_for_the_detail() {
        use super::table_rows;
        assert_eq!(table_rows(3, 21), 3);
        assert_eq!(table_rows(9, 21), 6, "80×24: six, the title says which");
        assert_eq!(table_rows(9, 37), 9, "120×40: every one");
        assert_eq!(table_rows(40, 37), 18);
    }

    /// A rate is written as the counts beside it: `2339/min` under counts
    /// of `1,487`, where the column grows to fit it as theirs do.
    #[test]
    fn a_rate_is_grouped_and_shortened_as_the_counts_are() {
        use super::super::{num, num_short};
        assert_eq!(super::rate_text(Some(2339.4), num), "2,339/min");
        assert_eq!(super::rate_text(Some(123_456.0), num_short), "123k/min");
        assert_eq!(super::rate_text(Some(12.4), num), "12/min");
        assert_eq!(super::rate_text(Some(1.54), num), "1.5/min");
        assert_eq!(super::rate_text(None, num), "—");
    }

    use crate::model::{BatchInfo, Counts, Millis};
    use crate::store::{BatchView, Dashboard};
    use crate::tui::action::Arrival;
    use crate::tui::app::{App, Setup};
    use crate::tui::theme::Palette;

    const NOW: Millis = 1_767_268_800_000;

    /// The table's row of a batch of a million items, 100,005 of them
    /// failed, at `width` columns.
    fn row(width: u16) -> String {
        let mut app = App::new(Setup::new("/x.db", "h", false, Palette::Mono), NOW);
        app.update(Arrival::Resize(width, 24));
        let batch = BatchView {
            info: BatchInfo {
                name: "記事".into(),
                counts: Counts {
                    pending: 899_995,
                    retry: 66_640,
                    manual: 33_365,
                    ..Counts::default()
                },
                ..BatchInfo::default()
            },
            minutes: Vec::new(),
            created_at: NOW,
        };
        super::super::answered(
            &mut app,
            NOW,
            Dashboard {
                batches: vec![batch],
                ..Dashboard::default()
            },
        );
        super::super::drawn_rows(&app)
            .into_iter()
            .find(|r| r.starts_with("│記事"))
            .unwrap_or_default()
    }

    /// The batch 記事 drawing from pool 本番アカウント, drawn to its limit,
    /// holding items for three reasons, shown at `width` × `height`.
    fn waiting_rows(width: u16, height: u16) -> Vec<String> {
        use crate::model::waiting::RetryTier;
        use crate::store::{PoolDim, PoolDimView, PoolView, UsageSum};
        let config = crate::config::Config::parse(
            "[limit.\"本番アカウント\"]\ntokens = \"600/min\"\n\
             [batch.\"記事\"]\nworker = [\"true\"]\nlimit = \"本番アカウント\"\n",
            std::path::Path::new("nightshift.toml"),
        )
        .unwrap();
        let setup = Setup::new("/x.db", "h", false, Palette::Mono).with_config(&config);
        let mut app = App::new(setup, NOW);
        app.update(Arrival::Resize(width, height));
        let rate = PoolDim {
            name: "tokens/min".into(),
            measure: crate::config::limits::Measure::Tokens,
            count: 600,
            per_us: 60_000_000,
        };
        let pool = PoolView {
            name: "本番アカウント".into(),
            // Drawn to its limit: the next token fits in 10 s.
            dims: vec![PoolDimView::read(
                &rate,
                (NOW + 10_000) * 1000 + 60_000_000 - 100_000,
                600,
                NOW,
            )],
            in_flight: 0,
            gone: Vec::new(),
            concurrency: None,
            hold: None,
            tokens_per_minute: vec![0; 30],
            today: UsageSum::default(),
        };
        let batch = BatchView {
            info: BatchInfo {
                name: "記事".into(),
                counts: Counts {
                    pending: 5,
                    retry: 3,
                    manual: 2,
                    ..Counts::default()
                },
                ..BatchInfo::default()
            },
            minutes: Vec::new(),
            created_at: NOW,
        };
        let retry = RetryTier {
            later: 3,
            next_at: Some(NOW + 1_800_000),
            ..RetryTier::default()
        };
        super::super::answered(
            &mut app,
            NOW,
            Dashboard {
                batches: vec![batch],
                pools: vec![pool],
                retry: Some(("記事".into(), retry)),
                ..Dashboard::default()
            },
        );
        super::super::drawn_rows(&app)
    }

    /// The batch detail's waiting lines, label and borders taken off.
    fn waiting_of(rows: &[String]) -> Vec<String> {
        let at = rows
            .iter()
            .position(|r| r.starts_with("│waiting"))
            .unwrap_or_else(|| panic!("no waiting line in {rows:#?}"));
        let mut out = vec![rows[at]["│waiting".len()..].to_string()];
        out.extend(
            rows[at + 1..]
                .iter()
                .take_while(|r| {
                    r.starts_with("│          ") && r.trim_end_matches('│').trim() != ""
                })
                .map(|r| r["│".len()..].to_string()),
        );
        out.iter()
            .map(|l| l.trim_end_matches('│').trim().to_string())
            .collect()
    }

    /// Three reasons at 120 columns were cut with `…`, the third lost: now
    /// they wrap under their label, every one read, by display width (the
    /// pool's Japanese name takes two cells a character), at 80 columns too.
    #[test]
    fn the_waiting_line_wraps_every_reason_into_the_pane() {
        let whole = "2 quarantined await a human; 3 in the retry tier, next at 12:30:00Z, \
                     and no runner is live (`nightshift run` starts one); 5 pending: waiting for pool 本番アカウント, tokens/min, next slot 12:00:09Z, \
                     and no runner is live (`nightshift run` starts one)";
        // A break between two CJK characters takes no space.
        let bare = |s: &str| s.replace(' ', "");
        for (w, h) in [(120, 40), (80, 24)] {
            let rows = waiting_rows(w, h);
            let lines = waiting_of(&rows);
            assert!(lines.len() > 1, "{w}: {lines:#?}\n{rows:#?}");
            assert_eq!(bare(&lines.concat()), bare(whole), "{w}: {rows:#?}");
            assert!(
                rows.iter()
                    .all(|r| crate::util::text::width(r) == w as usize),
                "{w}: {rows:#?}"
            );
        }
    }

    /// The screen at 120×40 with batch 記事 configured with `field` (one
    /// `key = value` line) and read as `info`.
    fn live_rows(field: &str, info: BatchInfo) -> Vec<String> {
        let config = crate::config::Config::parse(
            &format!("[batch.\"記事\"]\nworker = [\"true\"]\n{field}\n"),
            std::path::Path::new("nightshift.toml"),
        )
        .unwrap();
        let setup = Setup::new("/x.db", "h", false, Palette::Mono).with_config(&config);
        let mut app = App::new(setup, NOW);
        app.update(Arrival::Resize(120, 40));
        let batch = BatchView {
            info,
            minutes: Vec::new(),
            created_at: NOW,
        };
        super::super::answered(
            &mut app,
            NOW,
            Dashboard {
                batches: vec![batch],
                retry: Some(("記事".into(), Default::default())),
                ..Dashboard::default()
            },
        );
        super::super::drawn_rows(&app)
    }

    /// Items a live runner paces by the batch's own `rate_limit` say so,
    /// as `status` does.
    #[test]
    fn a_paced_batch_says_its_rate_limit_beside_the_runner() {
        let mut info = BatchInfo::live_for_test("記事", 3, NOW);
        info.counts.pending = 5;
        let rows = live_rows("rate_limit = \"4/min\"", info);
        assert_eq!(
            waiting_of(&rows).join(" "),
            "5 wait for the runner that holds the lock, paced at 4/min (rate_limit)",
            "{rows:#?}"
        );
    }

    /// A dead runner's claims on their last attempt: the batch detail says
    /// the next run quarantines them, by the batch's `max_attempts`.
    #[test]
    fn orphans_on_their_last_attempt_are_said_to_be_quarantined_next() {
        let mut info = BatchInfo::live_for_test("記事", 3, NOW);
        info.runners.seats[0] = crate::model::Seat::Crashed;
        info.counts.claimed = 3;
        info.runners.orphan_attempts = vec![(1, 2), (2, 1)];
        let rows = live_rows("max_attempts = 2", info);
        assert!(
            rows.iter().any(|r| r.contains(
                "orphaned  3 claimed items, taken back by the next run (1 to quarantine: its attempts are used)"
            )),
            "{rows:#?}"
        );
    }

    /// A count is never cut by its column (`100,005 (66` read as 100,005
    /// failed, 66 of them to retry): written whole where there is room,
    /// shortened where not.
    #[test]
    fn large_counts_are_whole_or_shortened_never_cut() {
        let wide = row(120);
        assert!(wide.contains(" 899,995 "), "{wide}");
        assert!(wide.contains(" 100,005 (66,640·33,365) "), "{wide}");
        let narrow = row(80);
        assert!(narrow.contains(" 899k "), "{narrow}");
        assert!(narrow.contains(" 100k (66.6k·33.3k) "), "{narrow}");
        assert!(narrow.contains("idle"), "{narrow}");
    }
}
