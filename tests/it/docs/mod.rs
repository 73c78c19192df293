//! What the documentation promises holds: the README's commands and
//! screens, the example workers, completions and man pages.

// The example workers under `assets/examples`.
mod examples;
// Completions, man pages (insta snapshots in `snapshots/`), metrics.
mod integrations;
// The README's commands, settings and screens.
mod readme;
