"""What the gateway does to an answer and to a request body, piece by piece: decoding (bounded), scrubbing
(across chunks), strict framing, the paths of each API and the worst case a request reserves."""

from __future__ import annotations

import gzip
import io
import zlib
from email.message import Message

import pytest

from dokimi.gateway.apis import APIS, apis_named, route_of
from dokimi.gateway.capture_proxy import BadBody, TooLarge, decoded_body, read_request_body
from dokimi.gateway.model import MEDIA_TOKENS, input_estimate, worst_case_usd
from dokimi.gateway.prices import Price, parse_price, with_prices, worst_cost
from dokimi.gateway.relay import PIECE, SCRUBBED, Decoder, Scrubber, UnreadableEncoding

KEY = "sk-ant-real-" + "z" * 30


@pytest.mark.parametrize("cut", [1, 5, len(KEY) // 2, len(KEY) - 1])
def test_a_key_split_across_chunks_is_scrubbed(cut: int) -> None:
    body = f'data: {{"text": "the key is {KEY} and again {KEY}"}}\n\n'.encode()
    at = body.index(KEY.encode()) + cut
    for pieces in ([body[:at], body[at:]], [body[i : i + 3] for i in range(0, len(body), 3)]):
        scrubber = Scrubber([KEY])
        out = b"".join(scrubber.feed(p) for p in pieces) + scrubber.end()
        assert KEY.encode() not in out and out.count(SCRUBBED.encode()) == 2
        assert out.replace(SCRUBBED.encode(), KEY.encode()) == body


def test_a_prefix_of_the_key_at_the_end_is_released_as_it_was() -> None:
    scrubber = Scrubber([KEY])
    assert scrubber.feed(b"abc sk-ant") == b"abc "
    assert scrubber.end() == b"sk-ant"


@pytest.mark.slow
def test_gzip_and_deflate_answers_are_decoded_in_bounded_pieces_and_others_refused() -> None:
    bomb = gzip.compress(b"\0" * (40 * 1024 * 1024))
    decoder = Decoder("gzip")
    sizes = [len(p) for p in decoder.feed(bomb)] + [len(p) for p in decoder.end()]
    assert sum(sizes) == 40 * 1024 * 1024 and max(sizes) <= PIECE
    raw = zlib.compressobj(wbits=-zlib.MAX_WBITS)
    deflated = raw.compress(b"hello") + raw.flush()
    decoder = Decoder("deflate")
    assert b"".join([*decoder.feed(deflated), *decoder.end()]) == b"hello"
    assert list(Decoder("identity").feed(b"x")) == [b"x"]
    with pytest.raises(UnreadableEncoding, match="br"):
        Decoder("br")


def _headers(**values: str) -> Message:
    message = Message()
    for name, value in values.items():
        message[name.replace("_", "-")] = value
    return message


@pytest.mark.parametrize(
    ("wire", "headers", "error"),
    [
        (b"-1\r\nxx", {"Transfer_Encoding": "chunked"}, BadBody),
        (b"+5\r\nhello\r\n0\r\n\r\n", {"Transfer_Encoding": "chunked"}, BadBody),
        (b"7fffffffffffffff\r\n", {"Transfer_Encoding": "chunked"}, TooLarge),
        (b"fffffff\r\n", {"Transfer_Encoding": "chunked"}, TooLarge),
        (b"5\r\nhel", {"Transfer_Encoding": "chunked"}, BadBody),
        (b"5\r\nhelloXX\r\n0\r\n\r\n", {"Transfer_Encoding": "chunked"}, BadBody),
        (b"", {"Content_Length": "-1"}, BadBody),
        (b"", {"Content_Length": "1e3"}, BadBody),
        (b"", {"Content_Length": "999999999999"}, TooLarge),
        (b"abc", {"Content_Length": "5"}, BadBody),
        (b"5\r\nhello\r\n0\r\n\r\n", {"Transfer_Encoding": "chunked", "Content_Length": "5"}, BadBody),
        (b"hello", {"Transfer_Encoding": "gzip, chunked"}, BadBody),
    ],
)
def test_a_request_body_with_broken_framing_is_refused_unread(
    wire: bytes, headers: dict[str, str], error: type[Exception]
) -> None:
    with pytest.raises(error):
        read_request_body(io.BytesIO(wire), _headers(**headers))


def test_a_well_framed_body_is_read_and_a_compressed_one_decoded_no_further_than_the_limit() -> None:
    chunked = b"5;ext=1\r\nhello\r\n6\r\n world\r\n0\r\nX-Trailer: 1\r\n\r\n"
    assert read_request_body(io.BytesIO(chunked), _headers(Transfer_Encoding="chunked")) == b"hello world"
    assert read_request_body(io.BytesIO(b"abcde"), _headers(Content_Length="5")) == b"abcde"
    assert decoded_body(gzip.compress(b"x" * 1000), "gzip") == b"x" * 1000
    with pytest.raises(TooLarge):
        decoded_body(gzip.compress(b"x" * 10_000), "gzip", limit=1000)


def test_only_each_apis_model_paths_are_routed() -> None:
    anthropic = apis_named(["anthropic"])
    assert route_of(anthropic, "POST", "/v1/messages") is not None
    count = route_of(anthropic, "POST", "/v1/messages/count_tokens")
    assert count is not None and count.action == "count"
    for method, path in [
        ("POST", "/v1/messages/batches"), ("GET", "/v1/files"), ("POST", "/v1/files"),
        ("GET", "/v1/organizations/api_keys"), ("GET", "/v1/models"), ("POST", "/v1/complete"),
        ("GET", "/v1/messages"), ("POST", "/v1/messages/"), ("POST", "/v1/messages/../messages/batches"),
        ("POST", "/responses"),
    ]:  # fmt: skip
        assert route_of(anthropic, method, path) is None, (method, path)
    gemini = route_of(apis_named(["gemini"]), "POST", "/v1beta/models/gemini-2.5-pro:streamGenerateContent")
    assert gemini is not None and gemini.path_model == "gemini-2.5-pro"
    assert route_of(apis_named(["gemini"]), "POST", "/v1beta/models/g:embedContent") is None
    assert route_of(apis_named(["openai-chat"]), "POST", "/v1/chat/completions") is not None
    assert route_of(apis_named(["openai-responses"]), "POST", "/responses/r1/cancel") is None


def test_the_worst_case_counts_every_byte_the_output_limit_and_each_media_block() -> None:
    price = Price(1.0, 5.0, 1.25, 0.1)
    body = b'{"model": "m", "max_tokens": 1000, "messages": []}'
    payload = {"model": "m", "max_tokens": 1000, "messages": []}
    assert worst_case_usd(price, APIS["anthropic"], body, payload) == pytest.approx(
        (len(body) * 1.25 + 1000 * 5.0) / 1e6
    )
    image = b'{"type": "image", "source": {"data": "iVBOR"}}'
    assert input_estimate(image) == len(image) + MEDIA_TOKENS
    unlimited = worst_case_usd(price, APIS["openai-responses"], b"{}", {})
    assert unlimited == pytest.approx(worst_cost(price, 2, 128_000))


def test_a_users_price_parses_joins_the_table_and_is_refused_when_malformed() -> None:
    model, price = parse_price("mystery-1=2,10")
    assert (model, price) == ("mystery-1", Price(2.0, 10.0, 2.5, 2.0))
    assert parse_price("m=1,2,3,4")[1] == Price(1.0, 2.0, 3.0, 4.0)
    assert "mystery-1" in with_prices({model: price})
    for bad in ("m", "=1,2", "m=1", "m=1,2,3", "m=a,b", "m=-1,2", "m=nan,1", "m=inf,1"):
        with pytest.raises(ValueError):
            parse_price(bad)
