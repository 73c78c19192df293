//! The config file read again while the dashboard is open: what it says
//! replaces what the old one said, and nothing else of the setup; one
//! refused leaves it all as it was.

use super::*;

fn config(text: &str) -> Box<Config> {
    Box::new(Config::parse(text, std::path::Path::new("/srv/nightshift.toml")).unwrap())
}

#[test]
fn a_new_config_brings_its_budgets_and_pools_and_keeps_the_rest() {
    let mut app = app_with(true, false);
    assert!(app.query().spend.is_empty());
    assert!(!app.tabs().contains(&Pane::Pools));
    app.update(Arrival::Config(Ok(config(
        "[limit.api]\nconcurrency = 2\n[batch.a]\nbudget = \"0.5/day\"\nlimit = \"api\"\n\
         [batch.new]\n",
    ))));
    assert_eq!(app.query().spend.len(), 1, "a's budget is read");
    assert!(app.tabs().contains(&Pane::Pools));
    assert_eq!(app.query().pools.len(), 1);
    assert_eq!(app.pool_batches("api"), vec!["a"]);
    assert!(app.batch_names().contains(&"new".to_string()));
    assert_eq!(
        (
            app.setup.read_only,
            app.setup.palette,
            app.setup.host.as_str()
        ),
        (true, Palette::Mono, "h")
    );
    assert_eq!(app.setup.display_path, "/x.db");
    assert_eq!(app.batch.as_deref(), Some("a"), "the selection stays");
    let flash = app.flash_text().unwrap();
    assert_eq!(
        (flash.text.as_str(), flash.error),
        ("nightshift.toml reloaded", false)
    );
}

#[test]
fn a_refused_config_keeps_the_old_one_and_says_why() {
    let mut app = app_with(false, false);
    app.update(Arrival::Config(Ok(config(
        "[batch.a]\nbudget = \"0.5/day\"\n",
    ))));
    let query = app.query();
    let why = "nightshift.toml has an error (line 2: …): showing the config as it was";
    app.update(Arrival::Config(Err(why.into())));
    assert_eq!(app.query(), query, "the same budgets read");
    assert!(app.setup.config.budgets.contains_key("a"));
    let flash = app.flash_text().unwrap();
    assert_eq!((flash.text.as_str(), flash.error), (why, true));
}

#[test]
fn a_batch_only_the_old_config_named_is_left() {
    let mut app = app();
    app.update(Arrival::Config(Ok(config("[batch.zz]\n"))));
    app.update(Intent::NextBatch);
    app.update(Intent::NextBatch);
    assert_eq!(app.batch.as_deref(), Some("zz"));
    app.update(Arrival::Config(Ok(config("[batch.a]\n"))));
    assert_eq!(app.batch.as_deref(), Some("a"), "zz is no longer listed");
    assert!(!app.batch_names().contains(&"zz".to_string()));
}
