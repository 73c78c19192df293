//! Pane 2: completions per minute, succeeded (outcome done or empty: the
//! worker exited 0) and failed (sparklines), and the run history (the
//! same per run, newest on the right).

use ratatui::Frame;
use ratatui::buffer::Buffer;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Paragraph, Sparkline, Widget};

use super::{num, pane_block, placeholder};
use crate::model::Run;
use crate::tui::app::App;
use crate::tui::theme::{Palette, Role};
use crate::util::text;

pub fn render(app: &App, f: &mut Frame, area: Rect) {
    let p = app.setup.palette;
    let name = app
        .batch
        .as_deref()
        .map(|b| super::clean(b, 60))
        .unwrap_or_default();
    let block = pane_block(
        app,
        area,
        vec![
            Span::styled("Activity", p.style(Role::Title)),
            Span::styled(format!(" · {name}"), p.style(Role::Dim)),
        ],
    );
    let Some(view) = app.batch.as_deref().and_then(|b| app.batch_view(b)) else {
        placeholder(
            app,
            f,
            area,
            block,
            &super::empty_text(app, "no activity yet"),
        );
        return;
    };
    let inner = block.inner(area);
    f.render_widget(block, area);
    // Tall: sparklines above the run history; short: side by side.
    let [spark_area, runs_area] = if inner.height >= 14 {
        Layout::vertical([Constraint::Percentage(50), Constraint::Percentage(50)]).areas(inner)
    } else {
        Layout::horizontal([Constraint::Percentage(60), Constraint::Percentage(40)])
            .spacing(2)
            .areas(inner)
    };
    let [done_label, done_area, failed_label, failed_area] = Layout::vertical([
        Constraint::Length(1),
        Constraint::Fill(1),
        Constraint::Length(1),
        Constraint::Fill(1),
    ])
    .areas(spark_area);
    // As many minutes as fit and as the batch has existed (the store
    // reads none from before it).
    let width = spark_area.width as usize;
    let shown = &view.minutes[view.minutes.len().saturating_sub(width)..];
    let done: Vec<u64> = shown.iter().map(|m| m.0.max(0) as u64).collect();
    let failed: Vec<u64> = shown.iter().map(|m| m.1.max(0) as u64).collect();
    let max = |v: &[u64]| v.iter().copied().max().unwrap_or(0);
    // One scale for both: 5 failures beside 100 done look like 5, not
    // like 100.
    let scale = max(&done).max(max(&failed)).max(1);
    let title = |what: &str, v: &[u64], role: Role| {
        Line::from(vec![
            Span::styled(what.to_string(), p.style(role)),
            Span::styled(
                format!(
                    "/min, last {} min (max {}, total {})",
                    v.len(),
                    num(max(v) as i64),
                    num(v.iter().sum::<u64>() as i64)
                ),
                p.style(Role::Dim),
            ),
        ])
    };
    let label_width = spark_area.width as usize;
    f.render_widget(
        Paragraph::new(super::fit_line(
            title("succeeded", &done, Role::Ok),
            label_width,
        )),
        done_label,
    );
    spark(f, done_area, &done, scale, p.style(Role::Ok));
    f.render_widget(
        Paragraph::new(super::fit_line(
            title("failed", &failed, Role::Fail),
            label_width,
        )),
        failed_label,
    );
    spark(f, failed_area, &failed, scale, p.style(Role::Fail));
    runs_chart(app, f, runs_area);
}

/// A sparkline of `values` on a scale up to `scale`, the newest minute at
/// the right edge. A minute with any completion shows at least the lowest
/// bar, however small beside the scale.
fn spark(f: &mut Frame, area: Rect, values: &[u64], scale: u64, style: ratatui::style::Style) {
    let levels = u64::from(area.height) * 8;
    let data: Vec<u64> = values
        .iter()
        .map(|&v| match v {
            0 => 0,
            v => (v * levels / scale).max(1),
        })
        .collect();
    let width = (data.len() as u16).min(area.width);
    let area = Rect {
        x: area.right() - width,
        width,
        ..area
    };
    f.render_widget(
        Sparkline::default()
            .data(&data)
            .max(levels.max(1))
            .style(style),
        area,
    );
}

/// The run history: per run a column of succeeded (`█`) and one of failed
/// (`▒`), scaled to the largest; readable without colour.
fn runs_chart(app: &App, f: &mut Frame, area: Rect) {
    let p = app.setup.palette;
    if area.height < 3 {
        return;
    }
    let [label, chart, axis] = Layout::vertical([
        Constraint::Length(1),
        Constraint::Fill(1),
        Constraint::Length(1),
    ])
    .areas(area);
    let per_run = 3usize;
    let fit = (area.width as usize / per_run).max(1);
    let runs: Vec<&Run> = app.data.runs.iter().take(fit).rev().collect();
    if runs.is_empty() {
        f.render_widget(
            Paragraph::new(Span::styled("no runs yet", p.style(Role::Dim))),
            label,
        );
        return;
    }
    let first = runs.first().map_or(0, |r| r.id);
    let last = runs.last().map_or(0, |r| r.id);
    // The legend's entries as far as they fit, each whole.
    let mut spans = vec![
        Span::styled("runs ", p.style(Role::Title)),
        Span::styled(format!("#{first}–#{last}"), p.style(Role::Dim)),
    ];
    let mut used: usize = spans.iter().map(|s| text::width(&s.content)).sum();
    for (entry, role) in [
        ("   █ succeeded", Role::Ok),
        ("  ▒ failed", Role::Fail),
        ("  · stepped down", Role::Dim),
    ] {
        used += text::width(entry);
        if used > area.width as usize {
            break;
        }
        spans.push(Span::styled(entry, p.style(role)));
    }
    f.render_widget(
        Paragraph::new(super::fit_line(Line::from(spans), area.width as usize)),
        label,
    );
    RunBars {
        runs: &runs,
        palette: p,
        per_run,
    }
    .render(chart, f.buffer_mut());
    let newest = runs.last().map(|r| {
        if r.stepped_down() {
            format!("newest #{}: stepped down ({})", r.id, r.state)
        } else {
            format!(
                "newest #{}: {} done, {} empty, {} failed",
                r.id,
                num(r.counts.done),
                num(r.counts.empty),
                num(r.counts.failed)
            )
        }
    });
    f.render_widget(
        Paragraph::new(Span::styled(
            text::cut(&newest.unwrap_or_default(), area.width as usize).into_owned(),
            p.style(Role::Dim),
        )),
        axis,
    );
}

struct RunBars<'a> {
    runs: &'a [&'a Run],
    palette: Palette,
    per_run: usize,
}

impl Widget for RunBars<'_> {
    fn render(self, area: Rect, buf: &mut Buffer) {
        let h = area.height as i64;
        if h == 0 {
            return;
        }
        let value = |r: &Run| (r.counts.done + r.counts.empty, r.counts.failed);
        let max = self
            .runs
            .iter()
            .map(|r| {
                let (d, fl) = value(r);
                d.max(fl)
            })
            .max()
            .unwrap_or(0)
            .max(1);
        let height = |v: i64| {
            if v <= 0 {
                0
            } else {
                ((v * h + max - 1) / max).clamp(1, h)
            }
        };
        for (i, run) in self.runs.iter().enumerate() {
            let x = area.x + (i * self.per_run) as u16;
            let (done, failed) = value(run);
            let idle = run.stepped_down();
            let columns = [
                (x, height(done), "█", Role::Ok),
                (x + 1, height(failed), "▒", Role::Fail),
            ];
            for (cx, ch, symbol, role) in columns {
                if cx >= area.right() {
                    continue;
                }
                for k in 0..ch {
                    let y = area.bottom() - 1 - k as u16;
                    buf[(cx, y)]
                        .set_symbol(symbol)
                        .set_style(self.palette.style(role));
                }
            }
            if idle && done == 0 && failed == 0 && x < area.right() {
                buf[(x, area.bottom() - 1)]
                    .set_symbol("·")
                    .set_style(self.palette.style(Role::Dim));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use ratatui::Terminal;
    use ratatui::backend::TestBackend;

    use super::*;

    fn drawn(values: &[u64], scale: u64) -> Vec<String> {
        let mut t = Terminal::new(TestBackend::new(4, 2)).unwrap();
        t.draw(|f| spark(f, f.area(), values, scale, ratatui::style::Style::default()))
            .unwrap();
        let buf = t.backend().buffer();
        (0..2)
            .map(|y| (0..4).map(|x| buf[(x, y)].symbol().to_string()).collect())
            .collect()
    }

    /// Done and failed share one scale: one failure beside a hundred done
    /// is the lowest bar, not a full one; newest at the right.
    #[test]
    fn one_scale_for_done_and_failed() {
        assert_eq!(drawn(&[100, 50], 100), ["  █ ", "  ██"]);
        assert_eq!(drawn(&[1, 0], 100), ["    ", "  ▁ "]);
        assert_eq!(drawn(&[0, 0, 0, 3], 3), ["   █", "   █"]);
    }
}
