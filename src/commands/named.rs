//! The item a command names: by its key (in either Unicode form, see
//! [`keyed`], the rule of every command taking a KEY), else by its label.
//! One rule for `show` and `log --key`, so both refuse a name no item has
//! alike.

use super::{Ctx, user_error};
use crate::model::Item;
use crate::store::{ItemRow, Store, StoreError};
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
    let key = keyed(store, batch, name)?;
    match ctx.no_key_if_unseen(batch, name, store.item(batch, &key)) {
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
            let many: Vec<_> = many.iter().map(|row| (batch, row)).collect();
            Err(several(
                &format!("in batch {batch:?} "),
                name,
                &many,
                &search,
                by_key,
            ))
        }
    }
}

/// What `--key NAME` names without a batch: the key itself (an item, or a
/// pruned one, in some batch has it; every batch's events of that key are
/// its log), else the one item in any batch with that label.
pub(super) enum Anywhere {
    Key(String),
    Item { batch: String, key: String },
}

/// The item `name` names in any batch, by the rule [`find`] names it by
/// in one: a key some batch has, else a label exactly one item has. None,
/// or several with the label: an error, as `find`'s.
pub(super) fn find_anywhere(store: &Store, name: &str, by_key: ByKey) -> anyhow::Result<Anywhere> {
    let batches = store.batch_names()?;
    for batch in &batches {
        if let Some(key) = store.held_key(batch, name)? {
            return Ok(Anywhere::Key(key));
        }
    }
    let mut matches = Vec::new();
    for batch in &batches {
        let left = LABEL_MATCHES + 1 - matches.len();
        matches.extend(
            store
                .labelled(batch, name, left)?
                .into_iter()
                .map(|row| (batch.as_str(), row)),
        );
        if matches.len() > LABEL_MATCHES {
            break;
        }
    }
    let search = format!(
        "nightshift items BATCH --search {}",
        sanitize::shell_word(name)
    );
    match matches.as_slice() {
        [(batch, one)] => Ok(Anywhere::Item {
            batch: (*batch).to_string(),
            key: one.key.clone(),
        }),
        [] => Err(user_error(format!(
            "no batch has an item {name:?} (neither a key nor a label of any item); to search \
             one batch's keys and labels: {search}"
        ))),
        many => {
            let many: Vec<_> = many.iter().map(|(b, row)| (*b, row)).collect();
            Err(several("", name, &many, &search, by_key))
        }
    }
}

/// The error for a label that several items have (`many`, each with its
/// batch; one more than listed when there are more): each named by its
/// key, as `by_key` names it, with its state. `where_` says where they
/// were looked for ("in batch \"b\" ", or nothing for every batch).
fn several(
    where_: &str,
    name: &str,
    many: &[(&str, &ItemRow)],
    search: &str,
    by_key: ByKey,
) -> anyhow::Error {
    let mut msg = format!(
        "{} items {where_}have the label {name:?}; name one by its key:",
        if many.len() > LABEL_MATCHES {
            format!("more than {LABEL_MATCHES}")
        } else {
            many.len().to_string()
        },
    );
    for (batch, row) in many.iter().take(LABEL_MATCHES) {
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
    user_error(msg)
}

/// The key `batch` holds the item named `name` under (`Store::held_key`:
/// as given, composed or decomposed), else `name` as given, for the
/// command to say no item has it. The one rule by which every command
/// naming an item by KEY (`show`, `log --key`, `run --key`, `requeue`,
/// `skip`, `cancel`) finds it: a key pasted decomposed names the item
/// `add` stored composed, and an item an older version stored decomposed
/// is named by either form.
pub(super) fn keyed(store: &Store, batch: &str, name: &str) -> Result<String, StoreError> {
    Ok(store
        .held_key(batch, name)?
        .unwrap_or_else(|| name.to_string()))
}

/// [`keyed`] for each of `names`.
pub(super) fn keyed_all(
    store: &Store,
    batch: &str,
    names: &[String],
) -> Result<Vec<String>, StoreError> {
    names.iter().map(|n| keyed(store, batch, n)).collect()
}
