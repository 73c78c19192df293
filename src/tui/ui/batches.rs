//! Pane 1: every batch with counts, progress and rate; below, the selected
//! batch in full (rate and ETA, spend, last run, schedule or pause, lock),
//! and on a tall screen its activity charts.

use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Cell, Paragraph, Row, Table};

use super::{bar, clean, num, pane_block, placeholder};
use crate::model::{BatchInfo, Millis, RunState};
use crate::tui::app::App;
use crate::tui::theme::Role;
use crate::util::time::compact;

/// Completions per minute: over the last 60 seconds (the current minute
/// plus the share of the previous one still inside the window) and over
/// the last hour, or over the minutes there are when the batch is younger
/// (`hour_minutes`): a two-minute-old batch has no hour to average over.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Rates {
    pub last_minute: f64,
    pub last_hour: f64,
    /// Minutes `last_hour` is over: 60, or fewer.
    pub hour_minutes: f64,
}

impl Rates {
    /// `last hour`, or `last 2 min` for a younger batch.
    pub fn hour_window(&self) -> String {
        if self.hour_minutes >= 60.0 {
            "last hour".into()
        } else {
            format!("last {} min", self.hour_minutes.ceil().max(1.0))
        }
    }
}

/// `minutes` as the store reads them: one per minute, oldest first, the
/// last being the current minute, none from before the batch existed.
pub fn rates(minutes: &[(i64, i64)], now: Millis) -> Rates {
    let total = |m: &(i64, i64)| (m.0 + m.1) as f64;
    let frac = (now.rem_euclid(60_000)) as f64 / 60_000.0;
    let n = minutes.len();
    let cur = minutes.last().map_or(0.0, total);
    let prev = if n >= 2 { total(&minutes[n - 2]) } else { 0.0 };
    let hour: f64 = minutes
        .iter()
        .rev()
        .take(61)
        .map(total)
        .fold(0.0, |a, b| a + b)
        - if n > 60 {
            total(&minutes[n - 61]) * frac
        } else {
            0.0
        };
    // The minutes covered: the current one so far, and those before it.
    let hour_minutes = (n.saturating_sub(1) as f64 + frac).min(60.0);
    Rates {
        last_minute: cur + prev * (1.0 - frac),
        last_hour: hour / hour_minutes.max(1.0),
        hour_minutes,
    }
}

fn rate_text(r: f64) -> String {
    if r >= 10.0 {
        format!("{r:.0}/min")
    } else {
        format!("{r:.1}/min")
    }
}

pub fn render(app: &App, f: &mut Frame, area: Rect) {
    let names = app.batch_names();
    let block = pane_block(
        app,
        area,
        vec![Span::styled(
            "Batches",
            app.setup.palette.style(Role::Title),
        )],
    );
    if names.is_empty() {
        placeholder(app, f, area, block, &super::empty_text(app, ""));
        return;
    }
    let table_rows = names.len().min(if area.height >= 40 { 10 } else { 6 }) as u16;
    let info = app.selected_info();
    let lines = info
        .as_ref()
        .map(|i| detail_lines(app, i, area.width))
        .unwrap_or_default();
    let [top, middle, bottom] = Layout::vertical([
        Constraint::Length(table_rows + 3),
        Constraint::Length(lines.len() as u16 + 2),
        Constraint::Fill(1),
    ])
    .areas(area);
    table(app, f, top, block, &names, table_rows as usize);
    if let Some(info) = &info {
        let block = pane_block(
            app,
            area,
            vec![Span::styled(
                clean(&info.name, 60),
                app.setup.palette.style(Role::Title),
            )],
        );
        let lines = super::fit_lines(lines, (middle.width as usize).saturating_sub(2));
        f.render_widget(Paragraph::new(lines).block(block), middle);
    }
    // What room is left shows the selected batch's activity.
    if bottom.height >= 6 {
        super::activity::render(app, f, bottom);
    }
}

fn table(
    app: &App,
    f: &mut Frame,
    area: Rect,
    block: ratatui::widgets::Block<'_>,
    names: &[String],
    visible: usize,
) {
    let p = app.setup.palette;
    let sel = app.batch_nav.sel;
    let top = sel.saturating_sub(visible.saturating_sub(1));
    let header = Row::new([
        "BATCH",
        "PENDING",
        "CLAIMED",
        "DONE",
        "FAILED r·m",
        "PROGRESS",
        "RATE",
        "STATE",
    ])
    .style(p.style(Role::Dim));
    let bar_width = if area.width >= 120 { 20 } else { 5 };
    let fixed = [7, 7, 7, 11, bar_width + 5, 8, 7];
    // The name column takes what the others leave (7 gaps between 8).
    let name_width = (area.width as usize)
        .saturating_sub(2 + 7 + fixed.iter().sum::<usize>())
        .max(12);
    let rows: Vec<Row> = names
        .iter()
        .enumerate()
        .skip(top)
        .take(visible)
        .map(|(i, name)| {
            let view = app.batch_view(name);
            let c = view.map(|v| v.info.counts).unwrap_or_default();
            let ratio = if c.total() > 0 {
                c.done as f64 / c.total() as f64
            } else {
                0.0
            };
            let rate = view.map_or(0.0, |v| rates(&v.minutes, app.now).last_minute);
            let (state, role) = match view.map(|v| &v.info) {
                Some(i) if i.pause.is_some() => ("paused", Role::Warn),
                Some(i) if i.held(app.now).is_some() => ("held", Role::Warn),
                Some(i) if i.running(app.now) => ("running", Role::Accent),
                _ => ("idle", Role::Dim),
            };
            let failed = Cell::from(format!(
                "{} ({}·{})",
                num(c.failed),
                num(c.retry),
                num(c.manual)
            ))
            .style(if c.failed > 0 {
                p.style(Role::Fail)
            } else {
                p.style(Role::Normal)
            });
            let row = Row::new(vec![
                Cell::from(clean(name, name_width)),
                Cell::from(num(c.pending)),
                Cell::from(num(c.claimed)),
                Cell::from(num(c.done)).style(p.style(Role::Ok)),
                failed,
                Cell::from(format!(
                    "{} {:>3}%",
                    bar(ratio, bar_width),
                    (ratio * 100.0).floor()
                )),
                Cell::from(rate_text(rate)),
                Cell::from(state).style(p.style(role)),
            ]);
            if i == sel {
                row.style(p.style(Role::Selected))
            } else {
                row
            }
        })
        .collect();
    let widths: Vec<Constraint> = std::iter::once(name_width)
        .chain(fixed)
        .map(|w| Constraint::Length(w as u16))
        .collect();
    f.render_widget(Table::new(rows, widths).header(header).block(block), area);
}

fn detail_lines(app: &App, info: &BatchInfo, area_width: u16) -> Vec<Line<'static>> {
    let p = app.setup.palette;
    let now = app.now;
    let c = &info.counts;
    let label = |s: &str| Span::styled(format!("{s:<10}"), p.style(Role::Dim));
    let mut lines = Vec::new();
    let ratio = if c.total() > 0 {
        c.done as f64 / c.total() as f64
    } else {
        0.0
    };
    let width = (area_width as usize).saturating_sub(55).clamp(10, 50);
    lines.push(Line::from(vec![
        label("progress"),
        Span::styled(bar(ratio, width), p.style(Role::Ok)),
        Span::raw(format!(
            " {:>3}%  {}/{} done · {} empty · {} skipped",
            (ratio * 100.0).floor(),
            num(c.done),
            num(c.total()),
            num(c.empty),
            num(c.skipped)
        )),
    ]));
    let minutes = app
        .batch_view(&info.name)
        .map(|v| v.minutes.as_slice())
        .unwrap_or(&[]);
    let r = rates(minutes, now);
    let best = if r.last_minute > 0.0 {
        r.last_minute
    } else {
        r.last_hour
    };
    let eta = if c.remaining() > 0 && best > 0.0 {
        format!(
            "ETA {}",
            compact((c.remaining() as f64 / best * 60.0) as u64)
        )
    } else if c.remaining() > 0 {
        "ETA —".into()
    } else {
        "nothing left".into()
    };
    lines.push(Line::from(vec![
        label("rate"),
        Span::raw(format!(
            "{} last minute · {} {} · {eta}",
            rate_text(r.last_minute),
            rate_text(r.last_hour),
            r.hour_window()
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
                Span::raw(format!("{:.2} {which} (#{})", run.counts.cost, run.id)),
            ]));
        }
        let summary = run.summary.clone().unwrap_or_else(|| "in progress".into());
        let role = match run.state {
            RunState::Failed | RunState::Crashed | RunState::Aborted => Role::Fail,
            RunState::Running => Role::Accent,
            RunState::Ok => Role::Ok,
            _ => Role::Warn,
        };
        lines.push(Line::from(vec![
            label("last run"),
            Span::styled(format!("#{} {}", run.id, run.state), p.style(role)),
            Span::styled(
                format!(
                    " · {} · {} · ",
                    run.trigger,
                    super::ago(run.started_at, now)
                ),
                p.style(Role::Dim),
            ),
            Span::raw(clean(&summary, 300)),
        ]));
    } else {
        lines.push(Line::from(vec![
            label("last run"),
            Span::styled("never run", p.style(Role::Dim)),
        ]));
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
    if let Some(hold) = info.held(now) {
        let until = crate::util::time::utc_clock(hold.until, now);
        let from = match &hold.key {
            Some(key) => super::item_name(
                key,
                hold.label.as_deref().unwrap_or_default(),
                super::key_width(area_width),
            ),
            None => "a worker".into(),
        };
        for text in [
            format!(
                "HELD until {until} ({}): no call starts before",
                super::ago(hold.until, now)
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
            let left = if l.expires_at >= now {
                format!("{} left", compact(((l.expires_at - now) / 1000) as u64))
            } else {
                "expired".into()
            };
            let run = l.run_id.map(|r| format!(" · run #{r}")).unwrap_or_default();
            let more = match info.locks.len() {
                0 | 1 => String::new(),
                n => format!(" · +{} more runners", n - 1),
            };
            Line::from(vec![
                label("lock"),
                Span::styled(clean(&l.holder.to_string(), 80), p.style(Role::Accent)),
                Span::raw(format!("{run} · {left}{more}")),
            ])
        }
        None => Line::from(vec![
            label("lock"),
            Span::styled("free (no run)", p.style(Role::Dim)),
        ]),
    });
    if let Some(fire) = &info.last_fire {
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
    lines
}

fn schedule_line(app: &App, info: &BatchInfo, label: Span<'static>) -> Line<'static> {
    let p = app.setup.palette;
    let Some(s) = app.setup.schedules.get(&info.name) else {
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
    let next = s
        .schedule
        .next_after(crate::util::time::to_datetime(app.now), s.tz)
        .map(|t| {
            let local = t.with_timezone(&s.tz);
            format!(
                "next {} ({})",
                local.format("%a %Y-%m-%d %H:%M %Z"),
                super::ago(t.timestamp_millis(), app.now)
            )
        })
        .unwrap_or_else(|| "never fires again".into());
    Line::from(vec![
        label,
        Span::raw(format!(
            "{} {} · ",
            clean(&s.schedule.expr, 60),
            s.tz.name()
        )),
        Span::styled(next, p.style(Role::Accent)),
    ])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_use_a_sliding_minute_and_the_hour() {
        let mut m = vec![(0, 0); 150];
        m[148] = (60, 0);
        m[149] = (10, 2);
        // 15 s into the current minute: 12 + 60 * 0.75.
        let r = rates(&m, 15_000);
        assert!((r.last_minute - 57.0).abs() < 1e-9, "{r:?}");
        assert!((r.last_hour - 72.0 / 60.0).abs() < 1e-9, "{r:?}");
        assert_eq!(r.hour_window(), "last hour");
        assert_eq!(rates(&[], 0).last_minute, 0.0);
        // A batch a minute and a quarter old: its rate over that time.
        let r = rates(&[(60, 0), (10, 2)], 15_000);
        assert!((r.last_hour - 72.0 / 1.25).abs() < 1e-9, "{r:?}");
        assert_eq!(r.hour_window(), "last 2 min");
    }
}
