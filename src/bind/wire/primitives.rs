//! The smallest pieces of the DNS wire format, shared by the message
//! codec and the rdata forms: names in wire form, a bounds-checked reader
//! that follows compression pointers, and the error of a message that
//! cannot be read. Pure, no I/O.

/// Compression pointers followed in one name before it is called malformed.
const MAX_POINTERS: usize = 64;

/// A name in uncompressed wire form (length-prefixed labels, the root's
/// zero byte last), as written or as read with pointers expanded.
pub type WireName = Vec<u8>;

/// The wire form of a dotted name (`example.com`, `example.com.` or `.`).
/// Labels are taken as given: callers pass validated names.
pub fn wire_name(text: &str) -> WireName {
    let mut out = Vec::with_capacity(text.len() + 2);
    for label in text
        .trim_end_matches('.')
        .split('.')
        .filter(|l| !l.is_empty())
    {
        out.push(label.len() as u8);
        out.extend_from_slice(label.as_bytes());
    }
    out.push(0);
    out
}

/// Why a received message could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("malformed DNS message: {0}")]
pub struct Malformed(pub &'static str);

/// A reader over one message.
pub struct Reader<'a> {
    msg: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    pub fn new(msg: &'a [u8]) -> Self {
        Reader { msg, pos: 0 }
    }

    pub fn at(msg: &'a [u8], pos: usize) -> Self {
        Reader { msg, pos }
    }

    pub fn pos(&self) -> usize {
        self.pos
    }

    pub fn u8(&mut self) -> Result<u8, Malformed> {
        let b = *self.msg.get(self.pos).ok_or(Malformed("truncated"))?;
        self.pos += 1;
        Ok(b)
    }

    pub fn u16(&mut self) -> Result<u16, Malformed> {
        Ok(u16::from_be_bytes([self.u8()?, self.u8()?]))
    }

    pub fn u32(&mut self) -> Result<u32, Malformed> {
        Ok(u32::from_be_bytes([
            self.u8()?,
            self.u8()?,
            self.u8()?,
            self.u8()?,
        ]))
    }

    pub fn bytes(&mut self, n: usize) -> Result<&'a [u8], Malformed> {
        let end = self.pos.checked_add(n).ok_or(Malformed("truncated"))?;
        let b = self.msg.get(self.pos..end).ok_or(Malformed("truncated"))?;
        self.pos = end;
        Ok(b)
    }

    /// A name, compression pointers followed (they may point anywhere
    /// earlier in the message).
    pub fn name(&mut self) -> Result<WireName, Malformed> {
        let mut out = Vec::new();
        let mut pos = self.pos;
        let mut jumped = false;
        let mut pointers = 0;
        loop {
            let len = *self.msg.get(pos).ok_or(Malformed("truncated name"))?;
            match len & 0xC0 {
                0xC0 => {
                    let low = *self.msg.get(pos + 1).ok_or(Malformed("truncated name"))?;
                    if !jumped {
                        self.pos = pos + 2;
                        jumped = true;
                    }
                    pointers += 1;
                    if pointers > MAX_POINTERS {
                        return Err(Malformed("compression loop"));
                    }
                    pos = (usize::from(len & 0x3F) << 8) | usize::from(low);
                }
                0 => {
                    let len = usize::from(len);
                    if len == 0 {
                        out.push(0);
                        if !jumped {
                            self.pos = pos + 1;
                        }
                        if out.len() > 255 {
                            return Err(Malformed("name longer than 255 bytes"));
                        }
                        return Ok(out);
                    }
                    let label = self
                        .msg
                        .get(pos..pos + 1 + len)
                        .ok_or(Malformed("truncated label"))?;
                    out.extend_from_slice(label);
                    pos += 1 + len;
                    if out.len() > 255 {
                        return Err(Malformed("name longer than 255 bytes"));
                    }
                }
                _ => return Err(Malformed("unknown label type")),
            }
        }
    }

    /// The whole message being read.
    pub fn msg(&self) -> &'a [u8] {
        self.msg
    }
}

/// The name lower-cased (ASCII letters only), for canonical comparisons
/// and TSIG (RFC 8945 section 4.3.3 wants the key and algorithm names in
/// canonical form).
pub fn lower(name: &[u8]) -> WireName {
    let mut out = name.to_vec();
    let mut i = 0;
    while i < out.len() && out[i] != 0 {
        let len = usize::from(out[i]);
        let end = (i + 1 + len).min(out.len());
        out[i + 1..end].make_ascii_lowercase();
        i += 1 + len;
    }
    out
}
