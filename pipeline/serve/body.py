"""An infer request's body, read within the server's size limit, and its response, compressed when the
client asks.

The limit (`serve --max-body-mb`) keeps one request from holding the server's memory: a Content-Length
over it is refused before a byte is read, a body without one (chunked) as soon as it passes it, and a
compressed body as soon as its inflated size does (a small gzip can inflate a thousandfold). Each is a
413. Request bodies may be gzip or deflate (zlib), what `tritonclient.http` sends with
`request_compression_algorithm`; any other Content-Encoding is a 415. Responses are compressed with
gzip or deflate when Accept-Encoding allows one (`response_compression_algorithm`).
"""

from __future__ import annotations

import gzip
import zlib

from fastapi import Request

from pipeline.serve.errors import HTTPError

WBITS = {"gzip": 16 + zlib.MAX_WBITS, "deflate": zlib.MAX_WBITS}  # zlib's names for the two formats
COMPRESS = {"gzip": lambda data: gzip.compress(data, compresslevel=1), "deflate": lambda data: zlib.compress(data, 1)}
MB = 2**20


async def read(request: Request, limit: int) -> bytes:
    """The body, decompressed, of at most `limit` bytes before and after decompression."""
    encoding = request.headers.get("content-encoding", "identity").strip().lower()
    if encoding not in (*WBITS, "identity"):
        raise HTTPError(415, f"Content-Encoding {encoding!r}: this server reads gzip, deflate or identity bodies")
    length = request.headers.get("content-length", "")
    if length.isdigit() and int(length) > limit:
        raise HTTPError(413, _too_large(f"the body's Content-Length, {int(length)} bytes,", limit))
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise HTTPError(413, _too_large(f"the body, {size} bytes so far,", limit))
        chunks.append(chunk)
    body = b"".join(chunks)
    return body if encoding == "identity" else _inflate(body, encoding, limit)


def compress(content: bytes, accept_encoding: str | None) -> tuple[bytes, dict[str, str]]:
    """The response body in the first of gzip and deflate the client accepts, with its header."""
    accepted = _accepted(accept_encoding or "")
    for encoding, squeeze in COMPRESS.items():
        if encoding in accepted:
            return squeeze(content), {"content-encoding": encoding, "vary": "Accept-Encoding"}
    return content, {}


def _inflate(body: bytes, encoding: str, limit: int) -> bytes:
    """Decompressed, member after member (gzip allows several), stopping one byte past the limit."""
    out, rest = [], body
    try:
        while rest:
            inflater = zlib.decompressobj(WBITS[encoding])
            out.append(inflater.decompress(rest, limit + 1 - sum(map(len, out))))
            if sum(map(len, out)) > limit:
                raise HTTPError(413, _too_large(f"the {encoding} body, inflated,", limit))
            if not inflater.eof:
                raise HTTPError(400, f"the {encoding} body ends before its compressed stream does")
            rest = inflater.unused_data
    except zlib.error as error:
        raise HTTPError(400, f"the body is not valid {encoding} data ({error})") from None
    return b"".join(out)


def _accepted(header: str) -> set[str]:
    """The content codings an Accept-Encoding header allows (q=0 refuses one)."""
    accepted = set()
    for item in header.lower().split(","):
        coding, _, parameters = item.partition(";")
        quality = parameters.strip().removeprefix("q=").strip()
        if coding.strip() and quality not in ("0", "0.0", "0.00", "0.000"):
            accepted.add(coding.strip())
    return accepted


def _too_large(what: str, limit: int) -> str:
    return f"{what} exceeds this server's limit of {limit} bytes ({limit / MB:g} MiB: serve --max-body-mb)"
