//! The Pools pane: reached by `6`, one pool a step, every configured pool
//! read with each poll, a batch's pool found by its name.

use super::*;
use crate::store::{PoolDimView, PoolView, UsageSum};

fn view(name: &str) -> PoolView {
    PoolView {
        name: name.into(),
        // Drawn to its limit: the next token fits in 10 s.
        dims: vec![PoolDimView::read(
            &crate::store::PoolDim {
                name: "tokens/min".into(),
                measure: crate::config::limits::Measure::Tokens,
                count: 600,
                per_us: 60_000_000,
            },
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
    }
}

fn pooled_app() -> App {
    let config = crate::config::Config::parse(
        "[limit.\"本番アカウント\"]\ntokens = \"600/min\"\n\
         [limit.b]\nrequests = \"1/s\"\n[limit.c]\nconcurrency = 2\n\
         [batch.\"記事\"]\nworker = [\"true\"]\nlimit = \"本番アカウント\"\n\
         [batch.other]\nworker = [\"true\"]\n",
        std::path::Path::new("nightshift.toml"),
    )
    .unwrap();
    let setup = Setup::new("/x.db", "h", false, Palette::Mono).with_config(&config);
    let mut app = App::new(setup, NOW);
    app.update(Arrival::Resize(80, 24));
    let q = app.query();
    crate::tui::ui::answered(
        &mut app,
        NOW,
        Dashboard {
            pools: q.pools.iter().map(|p| view(&p.name)).collect(),
            ..data(&q, false)
        },
    );
    app
}

#[test]
fn six_opens_the_pools_and_j_k_step_pool_by_pool() {
    use crate::tui::keymap::lookup;
    use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
    let six = KeyEvent::new(KeyCode::Char('6'), KeyModifiers::NONE);
    assert_eq!(
        lookup(Mode::Normal, Pane::Batches, &six),
        Some(Intent::GoPane(Pane::Pools))
    );
    let mut app = pooled_app();
    app.update(Intent::PrevPane);
    assert_eq!(app.pane, Pane::Pools, "with pools, the last tab");
    app.update(Intent::NextPane);
    assert_eq!(app.pane, Pane::Batches);
    app.update(Intent::GoPane(Pane::Pools));
    assert_eq!(app.pane, Pane::Pools);
    assert_eq!(app.data.pools.len(), 3);
    app.update(Intent::Down);
    assert_eq!(app.pool_nav.sel, 1);
    for _ in 0..5 {
        app.update(Intent::Down);
    }
    assert_eq!(app.pool_nav.sel, 2, "stops at the last pool");
    app.update(Intent::Top);
    assert_eq!(app.pool_nav.sel, 0);
}

#[test]
fn every_configured_pool_is_asked_for_and_a_batch_finds_its_own() {
    let app = pooled_app();
    let q = app.query();
    let names: Vec<&str> = q.pools.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(names, ["b", "c", "本番アカウント"]);
    assert_eq!(
        app.pool_of("記事").map(|p| p.name.as_str()),
        Some("本番アカウント")
    );
    assert_eq!(
        app.pool_of("other"),
        None,
        "a batch with no limit has no pool"
    );
    assert_eq!(app.pool_batches("本番アカウント"), ["記事"]);
}

/// `r` (and `p` on a paused batch) say that a hold on the batch's pool
/// stays: a retry-after is the provider's limit for every batch of it.
#[test]
fn the_run_key_says_the_pool_hold_stays() {
    let mut app = pooled_app();
    app.data.batches.push(info("記事", false));
    let pool = app
        .data
        .pools
        .iter_mut()
        .find(|p| p.name == "本番アカウント")
        .unwrap();
    pool.hold = Some(crate::store::PoolHold {
        until: NOW + 60_000,
        batch: "other".into(),
        key: None,
        label: None,
    });
    app.set_batch(Some("記事".into()));
    let effects = app.update(Intent::Resume);
    assert_eq!(
        effects,
        vec![Effect::Write(Write::Resume {
            batch: "記事".into()
        })]
    );
    let said = &app.flash_text().unwrap().text;
    assert!(
        said.starts_with("starting a run of 記事… its pool 本番アカウント stays held until 12:01:00Z by a retry-after from other"),
        "{said}"
    );
    assert_eq!(app.pool_hold_note("other"), None, "no pool, nothing to say");
}
