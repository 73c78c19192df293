//! Rows for `COPY ... FROM STDIN (FORMAT binary)`, built by hand into one
//! buffer: the fresh add's insert (see `hot::add_parts`). The server reads
//! each field in its type's binary form, with no text to parse and no
//! array to unnest.
//!
//! The format (PostgreSQL's `COPY` reference, "Binary Format"): a header
//! (signature, flags, extension length), then per row its field count
//! (`i16`) and per field its length (`i32`, `-1` for NULL) and bytes, all
//! integers big-endian; a trailer of `-1` (`i16`) ends it.

/// The signature, then flags (no OIDs) and an empty header extension.
const HEADER: &[u8] = b"PGCOPY\n\xff\r\n\0\0\0\0\0\0\0\0\0";

use crate::store::{Fault, Result, StoreError};

/// A `COPY` in binary format, row by row.
pub(super) struct BinaryRows {
    buf: Vec<u8>,
    /// A text field too long for its length word, if one was given.
    too_long: Option<usize>,
}

impl BinaryRows {
    /// An empty copy, its buffer sized for about `bytes`.
    pub(super) fn with_capacity(bytes: usize) -> BinaryRows {
        let mut buf = Vec::with_capacity(HEADER.len() + bytes + 2);
        buf.extend_from_slice(HEADER);
        BinaryRows {
            buf,
            too_long: None,
        }
    }

    /// Starts a row of `fields` fields (each then given in column order).
    pub(super) fn row(&mut self, fields: i16) -> &mut Self {
        self.buf.extend_from_slice(&fields.to_be_bytes());
        self
    }

    /// A `BIGINT` field.
    pub(super) fn int8(&mut self, v: i64) -> &mut Self {
        self.buf.extend_from_slice(&8i32.to_be_bytes());
        self.buf.extend_from_slice(&v.to_be_bytes());
        self
    }

    /// A nullable `BIGINT` field.
    pub(super) fn int8_opt(&mut self, v: Option<i64>) -> &mut Self {
        match v {
            Some(v) => self.int8(v),
            None => {
                self.buf.extend_from_slice(&(-1i32).to_be_bytes());
                self
            }
        }
    }

    /// An `INT` field.
    pub(super) fn int4(&mut self, v: i32) -> &mut Self {
        self.buf.extend_from_slice(&4i32.to_be_bytes());
        self.buf.extend_from_slice(&v.to_be_bytes());
        self
    }

    /// A `TEXT` field: its UTF-8 bytes (the session's encoding).
    pub(super) fn text(&mut self, v: &str) -> &mut Self {
        // Past 2 GiB the length does not fit (text stops at 1 GB anyway):
        // the copy is refused whole by `finish`.
        let Ok(len) = i32::try_from(v.len()) else {
            self.too_long = Some(v.len());
            return self;
        };
        self.buf.extend_from_slice(&len.to_be_bytes());
        self.buf.extend_from_slice(v.as_bytes());
        self
    }

    /// The whole copy, its trailer added.
    pub(super) fn finish(mut self) -> Result<Vec<u8>> {
        if let Some(n) = self.too_long {
            return Err(StoreError::Fault(Fault::Encoding(format!(
                "a text of {n} bytes is too long to send to PostgreSQL"
            ))));
        }
        self.buf.extend_from_slice(&(-1i16).to_be_bytes());
        Ok(self.buf)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_row_is_its_field_count_then_each_field_by_length() {
        let mut rows = BinaryRows::with_capacity(0);
        rows.row(4).int8(1).int4(-2).text("é").int8_opt(None);
        let bytes = rows.finish().unwrap();
        let mut want = HEADER.to_vec();
        want.extend([0, 4]);
        want.extend([0, 0, 0, 8, 0, 0, 0, 0, 0, 0, 0, 1]);
        want.extend([0, 0, 0, 4, 0xff, 0xff, 0xff, 0xfe]);
        want.extend([0, 0, 0, 2, 0xc3, 0xa9]);
        want.extend([0xff, 0xff, 0xff, 0xff]);
        want.extend([0xff, 0xff]);
        assert_eq!(bytes, want);
        assert_eq!(HEADER.len(), 19);
    }
}
