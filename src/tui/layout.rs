//! Where things go on the screen, in cells: what the state needs to know
//! (how many rows a list shows) and the panes are drawn into. No drawing
//! here.

pub const MIN_WIDTH: u16 = 80;
pub const MIN_HEIGHT: u16 = 24;

/// Rows a list pane shows: the screen less header, tabs, footer, the
/// pane's borders and its column header.
pub fn list_rows(size: (u16, u16)) -> usize {
    (size.1 as usize).saturating_sub(6).max(1)
}
