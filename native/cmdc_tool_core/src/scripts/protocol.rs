//! The worker protocol: length-prefixed frames on the worker's stdin/stdout, and the JSON
//! payloads of calls and errors.

use tokio::io::{AsyncRead, AsyncReadExt};

use crate::error::{Error, Result};

/// Largest frame either side accepts (a result larger than this is an error, not an OOM).
pub const MAX_FRAME: usize = 256 * 1024 * 1024;

/// Frame kinds. Requests: [`DESCRIBE`] (payload: a script path), [`CALL`] (payload:
/// `{"fn": name, "args": {...}}`). Answers: [`DESCRIBED`], [`READY`], [`RESULT`], [`PROGRESS`],
/// [`ERROR`], each with a UTF-8 JSON payload.
pub const DESCRIBE: u8 = b'D';
pub const CALL: u8 = b'C';
pub const DESCRIBED: u8 = b'D';
pub const READY: u8 = b'R';
pub const RESULT: u8 = b'O';
pub const PROGRESS: u8 = b'P';
pub const ERROR: u8 = b'E';

/// One frame: a 4-byte big-endian length `N`, then `N` bytes: the kind byte and the payload.
pub fn encode_frame(kind: u8, payload: &[u8]) -> Vec<u8> {
    let len = (payload.len() + 1) as u32;
    let mut out = Vec::with_capacity(payload.len() + 5);
    out.extend_from_slice(&len.to_be_bytes());
    out.push(kind);
    out.extend_from_slice(payload);
    out
}

/// The body length announced by a frame header, checked against [`MAX_FRAME`].
pub fn frame_len(header: [u8; 4]) -> Result<usize> {
    let n = u32::from_be_bytes(header) as usize;
    if n == 0 {
        return Err(Error::Process(
            "the worker sent an empty frame (protocol error)".into(),
        ));
    }
    if n > MAX_FRAME {
        return Err(Error::Process(format!(
            "the worker sent a {n}-byte frame, over the {MAX_FRAME}-byte limit"
        )));
    }
    Ok(n)
}

/// Reads one frame: `Ok(None)` at a clean end of stream (the worker closed its side).
pub async fn read_frame<R: AsyncRead + Unpin>(r: &mut R) -> Result<Option<(u8, Vec<u8>)>> {
    let mut header = [0u8; 4];
    match r.read_exact(&mut header).await {
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(None),
        Err(e) => return Err(Error::Process(format!("the frame channel broke: {e}"))),
    }
    let n = frame_len(header)?;
    let mut body = vec![0u8; n];
    r.read_exact(&mut body)
        .await
        .map_err(|e| Error::Process(format!("the frame channel broke: {e}")))?;
    let payload = body.split_off(1);
    Ok(Some((body[0], payload)))
}

/// The payload of a call request. `args_json` is already JSON text (the caller's encoder made
/// it), so it is spliced in, never re-parsed.
pub fn call_payload(function: &str, args_json: &[u8]) -> Vec<u8> {
    let name = serde_json::to_string(function).expect("a str always serializes");
    let mut out = Vec::with_capacity(args_json.len() + name.len() + 16);
    out.extend_from_slice(b"{\"fn\":");
    out.extend_from_slice(name.as_bytes());
    out.extend_from_slice(b",\"args\":");
    out.extend_from_slice(args_json);
    out.push(b'}');
    out
}

/// The [`Error::Script`] a worker's error payload (`{"kind", "message", "log"}`, JSON) names; a
/// payload of another shape is the message of kind `error`.
pub fn error_from_payload(payload: &[u8]) -> Error {
    let text = |v: &serde_json::Value, key: &str| v[key].as_str().unwrap_or_default().to_owned();
    match serde_json::from_slice::<serde_json::Value>(payload) {
        Ok(v) if v["message"].is_string() => Error::Script {
            kind: v["kind"].as_str().unwrap_or("error").to_owned(),
            message: text(&v, "message"),
            log: text(&v, "log"),
        },
        _ => Error::script("error", String::from_utf8_lossy(payload), ""),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;

    #[tokio::test]
    async fn frames_round_trip() {
        let frame = encode_frame(CALL, b"{\"a\":1}");
        assert_eq!(&frame[..4], &8u32.to_be_bytes());
        let mut r = &frame[..];
        let (kind, payload) = read_frame(&mut r).await.unwrap().unwrap();
        assert_eq!(kind, CALL);
        assert_eq!(payload, b"{\"a\":1}");
        assert_eq!(read_frame(&mut r).await.unwrap(), None);
        assert!(frame_len(0u32.to_be_bytes()).is_err());
        assert!(frame_len(((MAX_FRAME + 1) as u32).to_be_bytes()).is_err());
        // a frame cut short is an error, not a clean end
        let mut cut = &frame[..6];
        let e = read_frame(&mut cut).await.unwrap_err();
        assert!(
            matches!(&e, Error::Process(m) if m.contains("broke")),
            "{e:?}"
        );
    }

    #[test]
    fn call_payload_splices_args() {
        let p = call_payload("get \"it\"", b"{\"x\":[1,2]}");
        let v: Value = serde_json::from_slice(&p).unwrap();
        assert_eq!(v["fn"], "get \"it\"");
        assert_eq!(v["args"]["x"][1], 2);
    }

    #[test]
    fn error_payloads_become_script_errors() {
        let e = error_from_payload(br#"{"kind":"exception","message":"boom","log":"printed"}"#);
        assert_eq!(e, Error::script("exception", "boom", "printed"));
        assert_eq!(e.to_string(), "boom");
        // no kind or log: still a script error, of kind "error"
        assert_eq!(
            error_from_payload(br#"{"message":"m"}"#),
            Error::script("error", "m", "")
        );
        // not JSON: the text is the message
        assert_eq!(
            error_from_payload(b"plain"),
            Error::script("error", "plain", "")
        );
    }
}
