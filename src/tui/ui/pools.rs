//! Pane 6: the `[limit.NAME]` pools, the selected one first. Per pool: the
//! batches drawing from it and a retry-after hold with its end; what
//! passed in each limit's window (and, when its bucket is full, the next
//! slot); the calls in flight against its concurrency; the tokens drawn
//! per minute (a sparkline over the recent minutes); today's tokens, and
//! the place for today's spend.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;

use super::{bar, clean, num, pane_block, placeholder};
use crate::model::Millis;
use crate::store::PoolView;
use crate::tui::app::App;
use crate::tui::layout;
use crate::tui::theme::Role;
use crate::util::noun;

/// Cells before each row's label.
const INDENT: &str = "  ";
const TODAY: &str = "today (UTC)";
/// The tokens/min sparkline's label.
const RECENT: &str = "tokens drawn";
const BUDGET: &str = "budget";
/// Levels of the tokens/min sparkline, lowest first.
const LEVELS: [char; 8] = ['▁', '▂', '▃', '▄', '▅', '▆', '▇', '█'];

pub fn render(app: &App, f: &mut Frame, area: Rect) {
    let p = app.setup.palette;
    let block = pane_block(app, area, vec![Span::styled("Pools", p.style(Role::Title))]);
    let pools = &app.data.pools;
    if pools.is_empty() {
        let what = if app.setup.config.pools.is_empty() {
            "no limit pools in the config: a [limit.NAME] table, and limit = \"NAME\" in a batch, \
             share requests, tokens and calls in flight between batches and runners"
        } else {
            "loading…"
        };
        placeholder(app, f, area, block, what);
        return;
    }
    let width = (area.width as usize).saturating_sub(2);
    let rows = (area.height as usize).saturating_sub(2);
    let heights: Vec<usize> = pools
        .iter()
        .map(|v| layout::pool_rows(v, app.setup.config.pool_budgets.contains_key(&v.name)))
        .collect();
    let sel = app.pool_nav.sel.min(pools.len() - 1);
    let first = layout::first_pool_shown(&heights, sel, rows);
    let mut lines = Vec::new();
    for (i, pool) in pools.iter().enumerate().skip(first) {
        let block_lines = pool_lines(app, pool, i == sel, width);
        let left = pools.len() - i;
        // The last row says how many pools did not fit, when some do not.
        let room = if left > 1 {
            rows.saturating_sub(1)
        } else {
            rows
        };
        if lines.len() + block_lines.len() > room && !lines.is_empty() {
            lines.push(Line::from(Span::styled(
                format!("… {} more below (j/k)", noun::count(left, "pool")),
                p.style(Role::Dim),
            )));
            break;
        }
        lines.extend(block_lines);
    }
    let lines = super::fit_lines(lines, width);
    f.render_widget(Paragraph::new(lines).block(block), area);
}

/// One pool's rows (as many as `layout::pool_rows` counts): its name and
/// batches, its hold, a row per limit, the calls in flight, the tokens
/// per minute, today, a blank.
fn pool_lines(app: &App, v: &PoolView, selected: bool, width: usize) -> Vec<Line<'static>> {
    let p = app.setup.palette;
    let now = app.now;
    let wide = width >= 100;
    let bar_cells = if wide { 20 } else { 10 };
    // The label column as wide as this pool's longest label.
    let label = v
        .dims
        .iter()
        .map(|d| crate::util::text::width(&d.dimension))
        .chain([TODAY.len(), RECENT.len()])
        .max()
        .unwrap_or(0);
    // How far off a time is, where there is room to say it.
    let when = |t: Millis| {
        if wide {
            format!("{}Z ({})", super::clock(t, now), super::ago(t, now))
        } else {
            format!("{}Z", super::clock(t, now))
        }
    };
    let mut head = vec![
        Span::raw(if selected { "▸ " } else { "  " }),
        // The name first: the batches after it are cut before it is.
        Span::styled(clean(&v.name, width / 2), p.style(Role::Title)),
    ];
    let batches = app.pool_batches(&v.name);
    if !batches.is_empty() {
        let names: Vec<String> = batches.iter().map(|b| clean(b, 30)).collect();
        head.push(Span::styled(
            format!(" · {}", names.join(", ")),
            p.style(Role::Dim),
        ));
    }
    let mut lines = vec![Line::from(head)];
    if let Some(h) = v.hold.as_ref().filter(|h| h.until > now) {
        // The item named as in a batch's detail, with whose it is.
        let from = super::hold_asker(h.key.as_deref(), h.label.as_deref(), &h.batch, None, 9);
        for text in [
            // A line of its own: room for the time left at any width.
            format!(
                "{INDENT}HELD until {}Z ({}): no call starts before",
                super::clock(h.until, now),
                super::ago(h.until, now)
            ),
            format!("{INDENT}by a retry-after from {from}"),
        ] {
            lines.push(Line::from(Span::styled(text, p.style(Role::Warn))));
        }
    }
    let gauge = |name: &str, used: i64, limit: i64, note: Option<(String, Role)>| {
        let ratio = if limit > 0 {
            used as f64 / limit as f64
        } else {
            1.0
        };
        let mut spans = vec![
            Span::styled(format!("{INDENT}{} ", pad(name, label)), p.style(Role::Dim)),
            Span::raw(bar(ratio, bar_cells)),
            Span::raw(format!(" {} / {}", num(used), num(limit))),
        ];
        if let Some((note, role)) = note {
            spans.push(Span::styled(format!("  {note}"), p.style(role)));
        }
        Line::from(spans)
    };
    // Full is said for the largest call of its batches, by the rule that
    // admits calls: room for one token is no room for a call of 1,200.
    let call = app
        .setup
        .config
        .pool_calls
        .get(&v.name)
        .copied()
        .unwrap_or(0);
    for d in &v.dims {
        let note = match d.next_slot(call, now) {
            Some(t) => Some((
                // The words first: at 80 columns the slot may be cut.
                format!(
                    "{}, next slot {}",
                    crate::runner::pool::full_words(d, call, num),
                    when(t)
                ),
                Role::Warn,
            )),
            None if d.over_window() => Some((
                // The room first: at 80 columns the rest is cut.
                format!("{} free now; over its window, refilling", num(d.free())),
                Role::Dim,
            )),
            None if d.recent_is_mean() => Some((d.recent_said().trim().to_string(), Role::Dim)),
            _ => None,
        };
        // What passed in the limit's window, as a user counts it; "full"
        // is the bucket's word (what makes a call wait).
        lines.push(gauge(&d.dimension, d.recent, d.limit, note));
    }
    if let Some(c) = v.concurrency {
        let full = (v.in_flight >= i64::from(c))
            .then(|| ("full: every place in flight taken".into(), Role::Warn));
        lines.push(gauge("in flight", v.in_flight, i64::from(c), full));
        // A gone runner's places, in `status`'s words: not in flight.
        for g in &v.gone {
            let text = crate::commands::pools::gone_words(g, now);
            lines.push(Line::from(Span::styled(
                format!(
                    "{INDENT}{}",
                    clean(&text, width.saturating_sub(INDENT.len()))
                ),
                p.style(Role::Warn),
            )));
        }
    }
    // As many minutes as fit beside the longest label there can be, so
    // that every pool shows the same minutes.
    let room = width
        .saturating_sub(INDENT.len() + "output_tokens/day".len() + 1 + 36)
        .clamp(1, v.tokens_per_minute.len().max(1));
    let recent = &v.tokens_per_minute[v.tokens_per_minute.len().saturating_sub(room)..];
    let this_minute = recent.last().copied().unwrap_or(0);
    lines.push(Line::from(vec![
        Span::styled(
            format!("{INDENT}{} ", pad(RECENT, label)),
            p.style(Role::Dim),
        ),
        Span::styled(sparkline(recent), p.style(Role::Accent)),
        Span::styled(
            format!(" {}/min now, last {} min", num(this_minute), recent.len()),
            p.style(Role::Dim),
        ),
    ]));
    lines.push(today_line(app, v, label));
    lines.extend(budget_line(app, v, label));
    lines.push(Line::from(""));
    lines
}

/// Today's tokens (UTC day); the spend is the budget row's.
fn today_line(app: &App, v: &PoolView, label: usize) -> Line<'static> {
    let p = app.setup.palette;
    let t = &v.today;
    let tokens = if t.attempts == 0 {
        "no calls".to_string()
    } else {
        let mut s = format!(
            "{} in + {} out tokens, {} {}",
            num(t.input_tokens),
            num(t.output_tokens),
            num(t.attempts),
            noun::of(t.attempts, "call")
        );
        if t.unreported > 0 {
            s.push_str(&format!(
                " ({} estimated for {} unreported)",
                num(t.estimated_tokens),
                num(t.unreported)
            ));
        }
        s
    };
    Line::from(vec![
        Span::styled(
            format!("{INDENT}{} ", pad(TODAY, label)),
            p.style(Role::Dim),
        ),
        Span::raw(tokens),
    ])
}

/// The pool's own budget, spent against its limit in the window now
/// (`$12.40 of $20.00 today, resets 00:00Z`), when it has one.
fn budget_line(app: &App, v: &PoolView, label: usize) -> Option<Line<'static>> {
    use crate::runner::budget;
    let p = app.setup.palette;
    let b = app.setup.config.pool_budgets.get(&v.name)?;
    let scope = crate::store::SpendScope::Pool;
    let key = budget::key(scope, &v.name, b, app.now);
    let (text, role) = match app.data.spent.iter().find(|(k, _)| *k == key) {
        Some((_, spent)) => {
            let state = budget::state(scope, v.name.clone(), b, *spent, app.now);
            let role = if state.reached {
                Role::Fail
            } else {
                Role::Normal
            };
            (state.summary(app.now), role)
        }
        None => ("not read yet".to_string(), Role::Dim),
    };
    Some(Line::from(vec![
        Span::styled(
            format!("{INDENT}{} ", pad(BUDGET, label)),
            p.style(Role::Dim),
        ),
        Span::styled(text, p.style(role)),
    ]))
}

/// `text` padded with spaces to `cells` (by display width).
fn pad(text: &str, cells: usize) -> String {
    let w = crate::util::text::width(text);
    format!("{text}{}", " ".repeat(cells.saturating_sub(w)))
}

/// One cell per minute, the newest at the right: blank for none, else a
/// level of the busiest minute shown.
fn sparkline(values: &[i64]) -> String {
    let top = values.iter().copied().max().unwrap_or(0).max(1);
    values
        .iter()
        .map(|&n| {
            if n <= 0 {
                '·'
            } else {
                let i = (n.saturating_mul(8) - 1) / top;
                LEVELS[usize::try_from(i).unwrap_or(7).min(7)]
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::sparkline;
    use crate::config::limits::Measure;
    use crate::model::{BatchInfo, Counts, Millis};
    use crate::store::{
        BatchView, Dashboard, PoolDim, PoolDimView, PoolHold, PoolView, Spent, UsageSum,
    };
    use crate::tui::action::{Arrival, Intent, Pane};
    use crate::tui::app::{App, Setup};
    use crate::tui::theme::Palette;

    const NOW: Millis = 1_767_268_800_000;
    const POOL: &str = "オープンAI本番アカウント・夜間バッチ共用";

    #[test]
    fn the_sparkline_scales_to_the_busiest_minute() {
        assert_eq!(sparkline(&[0, 1, 4, 8]), "·▁▄█");
        assert_eq!(sparkline(&[0, 0]), "··");
        assert_eq!(sparkline(&[]), "");
    }

    /// A rate of `count` a minute whose bucket's TAT is `ahead_us` past
    /// now, its window having counted `recent`.
    fn rate(name: &str, measure: Measure, count: i64, ahead_us: i64, recent: i64) -> PoolDimView {
        let rate = PoolDim {
            name: name.into(),
            measure,
            count,
            per_us: MINUTE_US,
        };
        PoolDimView::read(&rate, NOW * 1000 + ahead_us, recent, NOW)
    }

    const MINUTE_US: i64 = 60_000_000;

    /// The tokens/min of `view`, in debt until `at` (a call of nothing
    /// fits then).
    fn tokens_until(at: Millis, recent: i64) -> PoolDimView {
        let ahead = (at - NOW) * 1000 + MINUTE_US;
        rate("tokens/min", Measure::Tokens, 250_000, ahead, recent)
    }

    fn view() -> PoolView {
        PoolView {
            name: POOL.into(),
            dims: vec![
                rate("requests/min", Measure::Requests, 3000, 12 * 20_000, 12),
                tokens_until(NOW + 14_000, 250_000),
                PoolDimView::read(
                    &PoolDim {
                        name: "requests/s".into(),
                        measure: Measure::Requests,
                        count: 10,
                        per_us: 1_000_000,
                    },
                    NOW * 1000,
                    2,
                    NOW,
                ),
            ],
            in_flight: 3,
            gone: Vec::new(),
            concurrency: Some(16),
            hold: Some(PoolHold {
                until: NOW + 125_000,
                batch: "記事の要約".into(),
                key: Some("k1".into()),
                label: Some("東京の天気".into()),
            }),
            tokens_per_minute: (0..30).map(|i| i * 100).collect(),
            today: UsageSum {
                attempts: 40,
                input_tokens: 12_000,
                output_tokens: 8_000,
                unreported: 2,
                estimated_tokens: 2_400,
                reported_estimate: 0,
            },
        }
    }

    /// The window now of the test pool's `budget = "1.0/day"`.
    fn spend_key() -> crate::store::SpendKey {
        let b = crate::config::budget::Budget {
            amount: 1.0,
            period: std::time::Duration::from_secs(86_400),
        };
        crate::runner::budget::key(crate::store::SpendScope::Pool, POOL, &b, NOW)
    }

    /// The pool's batches and an app that has polled them, at `size`.
    fn app(size: (u16, u16)) -> App {
        app_with(size, view())
    }

    /// The same with the pool as `pool` has it.
    fn app_with(size: (u16, u16), pool: PoolView) -> App {
        let config = crate::config::Config::parse(
            &format!(
                "[limit.\"{POOL}\"]\nrequests = \"3000/min\"\ntokens = \"250000/min\"\n\
                 concurrency = 16\nbudget = \"1.0/day\"\n[batch.\"記事の要約\"]\nworker = [\"true\"]\nlimit = \"{POOL}\"\n"
            ),
            std::path::Path::new("nightshift.toml"),
        )
        .unwrap();
        let setup = Setup::new("/x.db", "h", false, Palette::Mono).with_config(&config);
        let mut app = App::new(setup, NOW);
        app.update(Arrival::Resize(size.0, size.1));
        let batch = BatchView {
            info: BatchInfo {
                name: "記事の要約".into(),
                counts: Counts {
                    pending: 12,
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
                retry: Some(("記事の要約".into(), Default::default())),
                pools: vec![pool],
                spent: vec![(
                    spend_key(),
                    Spent {
                        micros: 400_000,
                        attempts: 4,
                    },
                )],
                ..Dashboard::default()
            },
        );
        app
    }

    fn draw(app: &App) -> Vec<String> {
        super::super::drawn_rows(app)
    }

    fn find<'a>(rows: &'a [String], what: &str) -> &'a str {
        rows.iter()
            .find(|r| r.contains(what))
            .unwrap_or_else(|| panic!("no row with {what:?}:\n{}", rows.join("\n")))
    }

    /// At 80×24 every limit, the calls in flight, the sparkline and today
    /// show; the long Japanese head line is cut by display width, with `…`.
    /// At 120×40 the hold reads in full with its end.
    #[test]
    fn a_pool_reads_at_80x24_and_120x40() {
        for size in [(80, 24), (120, 40)] {
            let mut app = app(size);
            app.update(Intent::GoPane(Pane::Pools));
            let rows = draw(&app);
            let cols = size.0 as usize;
            for r in &rows {
                assert_eq!(crate::util::text::width(r), cols, "{r:?}");
            }
            let head = find(&rows, "▸ オープンAI");
            assert!(head.contains("記事の要約"), "{head}");
            let held = find(&rows, "HELD until 12:02:05Z");
            let by = find(&rows, "by a retry-after from");
            assert!(by.contains("from 東京の天気 (k1) of 記事の要約"), "{by}");
            assert!(find(&rows, "requests/min").contains("12 / 3,000"));
            assert!(
                !find(&rows, "requests/min").contains("mean"),
                "a minute's window counts itself"
            );
            let second = find(&rows, "requests/s");
            assert!(
                second.contains("2 / 10  (the last minute's mean)"),
                "{second}"
            );
            let tokens = find(&rows, "tokens/min   █");
            assert!(tokens.contains("250,000 / 250,000"), "{tokens}");
            assert!(tokens.contains("full, next slot 12:00:14Z"), "{tokens}");
            assert!(!tokens.contains('…'), "{tokens}");
            assert!(find(&rows, "in flight").contains("3 / 16"));
            let spark = find(&rows, "tokens drawn");
            assert!(spark.contains("2,900/min now"), "{spark}");
            assert!(spark.contains('█'), "{spark}");
            let today = find(&rows, "today (UTC)");
            assert!(
                today.contains("12,000 in + 8,000 out tokens, 40 calls"),
                "{today}"
            );
            if cols == 80 {
                // The unreported estimate and the spend do not fit: cut.
                assert!(today.trim_end_matches(['│', ' ']).ends_with('…'), "{today}");
            }
            // 2m5s from 12:00:00, rounded up: never said nearer than it
            // is (read at the minute's middle, it was `in 1m`).
            assert!(
                held.contains("12:02:05Z (in 3m): no call starts before"),
                "{held}"
            );
            let budget = find(&rows, "budget");
            assert!(
                budget.contains("$0.40 of $1.00 today, resets 00:00Z"),
                "{budget}"
            );
        }
    }

    /// More tokens settled in the last minute than the limit, with room in
    /// the bucket (it refilled meanwhile): the gauge says why, and the room
    /// now, not a bare count that reads as a broken limit.
    #[test]
    fn a_window_over_its_limit_says_the_bucket_refills() {
        let mut v = view();
        // 249,178 tokens drawn of the bucket: 240 µs each.
        v.dims[1] = rate(
            "tokens/min",
            Measure::Tokens,
            250_000,
            249_178 * 240,
            313_421,
        );
        assert_eq!(v.dims[1].used, 249_178);
        for size in [(80, 24), (120, 40)] {
            let mut app = app_with(size, v.clone());
            app.update(Intent::GoPane(Pane::Pools));
            let rows = draw(&app);
            let tokens = find(&rows, "tokens/min   █");
            assert!(tokens.contains("313,421 / 250,000"), "{tokens}");
            assert!(!tokens.contains("full"), "{tokens}");
            if size.0 == 120 {
                assert!(
                    tokens.contains("822 free now; over its window, refilling"),
                    "{tokens}"
                );
            } else {
                assert!(tokens.contains("822 free now; over"), "{tokens}");
                assert!(
                    tokens.trim_end_matches(['│', ' ']).ends_with('…'),
                    "{tokens}"
                );
            }
        }
        // The line of `status`, and the room in `--json`.
        let line = crate::commands::pools::pool_line(&v, 0, NOW);
        assert!(
            line.contains(
                "tokens/min 313421/250000 (over its window: the bucket refills as it goes; 822 free now)"
            ),
            "{line}"
        );
        assert_eq!(
            crate::commands::pools::pool_json(&v, 0, NOW)["limits"][1]["free"],
            822
        );
    }

    /// The batch detail names the pool, the limit and the next slot its
    /// pending items wait for (the hold first: it is what stops them).
    #[test]
    fn the_batch_detail_says_which_pool_holds_its_items() {
        let mut app = app((120, 40));
        let rows = draw(&app);
        let waiting = find(&rows, "waiting");
        assert!(
            waiting.contains(&format!(
                "12 held until 12:02:05Z (retry-after for pool {POOL})"
            )),
            "{waiting}"
        );
        // The hold over: the full bucket is what they wait for.
        app.update(Arrival::Tick(NOW + 126_000));
        let mut v = view();
        v.hold = None;
        v.dims[1] = tokens_until(NOW + 130_000, 250_000);
        let data = Dashboard {
            pools: vec![v],
            ..app.data.clone()
        };
        super::super::answered(&mut app, NOW + 126_000, data);
        let rows = draw(&app);
        let waiting = find(&rows, "waiting");
        assert!(
            waiting.contains(&format!(
                "waiting for pool {POOL}, tokens/min, next slot 12:02:10Z"
            )),
            "{waiting}"
        );
    }
}
