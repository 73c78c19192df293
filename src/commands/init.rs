//! `nightshift init`: the store and a commented example config.

use anyhow::Context;

use super::{Ctx, Exit, out};
use crate::config::{CONFIG_FILE, EXAMPLE};
use crate::store::Store;

pub fn run(ctx: &Ctx) -> anyhow::Result<Exit> {
    let (_store, created) = Store::create(&ctx.db)?;
    if created {
        out(format!("created store {}", ctx.db.display()))?;
    } else {
        out(format!(
            "store {} already exists (left as it is)",
            ctx.db.display()
        ))?;
    }
    let dir = ctx
        .db
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(std::path::Path::new("."));
    let config = ctx
        .config
        .file
        .clone()
        .unwrap_or_else(|| dir.join(CONFIG_FILE));
    if config.exists() {
        out(format!(
            "config {} already exists (left as it is)",
            config.display()
        ))?;
    } else {
        std::fs::write(&config, EXAMPLE)
            .with_context(|| format!("writing {}", config.display()))?;
        out(format!(
            "wrote example config {} (edit it: every key is explained)",
            config.display()
        ))?;
    }
    Ok(Exit::Ok)
}
