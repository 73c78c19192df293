//! The item a command names: by its key, else by its label. One rule for
//! `show` and `log --key`, so both refuse a name no item has alike.

use super::{Ctx, user_error};
use crate::model::Item;
use crate::store::{Store, StoreError};
use crate::util::sanitize;

/// Items listed when several have the label a command was given.
const LABEL_MATCHES: usize = 20;

/// How a command names one item by its key (batch and key already quoted
/// for the shell), for the list of several that share a label.
pub(super) type ByKey = fn(batch: &str, key: &str) -> String;

pub(super) const SHOW: ByKey = |batch, key| format!("nightshift show {batch} {key}");
pub(super) const LOG: ByKey = |batch, key| format!("nightshift log {batch} --key {key}");

/// The item named `name` in `batch`: the one with that key, else the one
/// item with that label. Several with the label, or none: an error that
/// lists them (as `by_key` names each), or says how to search. A pruned
/// key: the store's `Pruned`, for the caller to show.
pub(super) fn find(
    ctx: &Ctx,
    store: &Store,
    batch: &str,
    name: &str,
    by_key: ByKey,
) -> anyhow::Result<Item> {
    match ctx.no_key_if_unseen(batch, name, store.item(batch, name)) {
        Err(StoreError::UnknownKey { .. }) => {}
        found => return Ok(found?),
    }
    let labelled = store.labelled(batch, name, LABEL_MATCHES + 1);
    let matches = ctx.empty_if_unseen(batch, labelled)?;
    // Names are quoted with `{:?}` (controls escaped; the caller makes
    // the whole message inert), as the store's own errors quote them.
    let search = format!(
        "nightshift items {} --search {}",
        sanitize::shell_word(batch),
        sanitize::shell_word(name)
    );
    match matches.as_slice() {
        [one] => Ok(store.item(batch, &one.key)?),
        [] => Err(user_error(format!(
            "no item {name:?} in batch {batch:?} (neither a key nor a label); to search keys and labels: {search}"
        ))),
        many => {
            let mut msg = format!(
                "{} items in batch {batch:?} have the label {name:?}; name one by its key:",
                if many.len() > LABEL_MATCHES {
                    format!("more than {LABEL_MATCHES}")
                } else {
                    many.len().to_string()
                },
            );
            for row in many.iter().take(LABEL_MATCHES) {
                msg.push_str(&format!(
                    "\n  {}   ({})",
                    by_key(
                        &sanitize::shell_word(batch),
                        &sanitize::shell_word(&row.key)
                    ),
                    crate::model::state_word(row.status, row.tier, row.outcome)
                ));
            }
            if many.len() > LABEL_MATCHES {
                msg.push_str(&format!("\n  all of them: {search}"));
            }
            Err(user_error(msg))
        }
    }
}
