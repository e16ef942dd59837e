"""Hand-encoded Kafka requests for the raw-socket tests.

Only what the data-path tests need, written from Kafka's protocol guide:
request header v1, ApiVersions v0, Produce v3, ListOffsets v1, Fetch v4
(all non-flexible versions), and record batch v2 with CRC-32C. Every decoder
reads exactly the fields of its version and checks that nothing is left over.
"""
import socket
import struct
import time

# --- CRC-32C (Castagnoli), table-driven -----------------------------------

_CRC32C_TABLE = []
for _byte in range(256):
    _crc = _byte
    for _ in range(8):
        _crc = (_crc >> 1) ^ 0x82F63B78 if _crc & 1 else _crc >> 1
    _CRC32C_TABLE.append(_crc)


def crc32c(data: bytes) -> int:
    crc = 0xFFFFFFFF
    for byte in data:
        crc = _CRC32C_TABLE[(crc ^ byte) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


# --- primitive encoders ----------------------------------------------------


def zigzag_varint(value: int) -> bytes:
    encoded = (value << 1) ^ (value >> 63)
    out = bytearray()
    while True:
        low = encoded & 0x7F
        encoded >>= 7
        if encoded:
            out.append(low | 0x80)
        else:
            out.append(low)
            return bytes(out)


def string(value) -> bytes:
    if value is None:
        return struct.pack(">h", -1)
    data = value.encode()
    return struct.pack(">h", len(data)) + data


def nullable_bytes(value) -> bytes:
    if value is None:
        return struct.pack(">i", -1)
    return struct.pack(">i", len(value)) + value


def array(items) -> bytes:
    items = list(items)
    return struct.pack(">i", len(items)) + b"".join(items)


# --- record batch v2 -------------------------------------------------------


def record(offset_delta: int, key, value, timestamp_delta: int = 0, headers=()) -> bytes:
    body = bytearray()
    body += b"\x00"  # attributes
    body += zigzag_varint(timestamp_delta)
    body += zigzag_varint(offset_delta)
    for part in (key, value):
        if part is None:
            body += zigzag_varint(-1)
        else:
            body += zigzag_varint(len(part)) + part
    body += zigzag_varint(len(headers))
    for header_key, header_value in headers:
        encoded_key = header_key.encode()
        body += zigzag_varint(len(encoded_key)) + encoded_key
        if header_value is None:
            body += zigzag_varint(-1)
        else:
            body += zigzag_varint(len(header_value)) + header_value
    return zigzag_varint(len(body)) + bytes(body)


def record_batch(records, base_timestamp_ms: int = None, corrupt_crc: bool = False,
                 producer_id: int = -1, producer_epoch: int = -1, base_sequence: int = -1) -> bytes:
    """An uncompressed, non-transactional batch of (key, value) pairs
    (idempotent when a producer id, epoch and base sequence are given)."""
    if base_timestamp_ms is None:
        base_timestamp_ms = int(time.time() * 1000)
    encoded = b"".join(record(index, key, value) for index, (key, value) in enumerate(records))
    after_crc = (
        struct.pack(
            ">hiqqqhii",
            0,  # attributes
            len(records) - 1,  # last offset delta
            base_timestamp_ms,
            base_timestamp_ms,  # max timestamp
            producer_id,
            producer_epoch,
            base_sequence,
            len(records),
        )
        + encoded
    )
    crc = crc32c(after_crc)
    if corrupt_crc:
        crc ^= 0x5A5A5A5A
    # batch length counts from partition leader epoch to the end
    batch_length = 4 + 1 + 4 + len(after_crc)
    return struct.pack(">qiibI", 0, batch_length, -1, 2, crc) + after_crc


# --- requests --------------------------------------------------------------

API_PRODUCE = 0
API_FETCH = 1
API_LIST_OFFSETS = 2
API_METADATA = 3
API_VERSIONS = 18


def request_frame(api_key: int, api_version: int, correlation_id: int, body: bytes,
                  client_id: str = "strom-rawwire") -> bytes:
    header = struct.pack(">hhi", api_key, api_version, correlation_id) + string(client_id)
    payload = header + body
    return struct.pack(">i", len(payload)) + payload


def produce_v3_body(topic: str, partition: int, records: bytes, acks: int = -1,
                    timeout_ms: int = 10000) -> bytes:
    partition_data = struct.pack(">i", partition) + nullable_bytes(records)
    topic_data = string(topic) + array([partition_data])
    return string(None) + struct.pack(">hi", acks, timeout_ms) + array([topic_data])


def list_offsets_v1_body(topic: str, partition: int, timestamp: int) -> bytes:
    partitions = array([struct.pack(">iq", partition, timestamp)])
    return struct.pack(">i", -1) + array([string(topic) + partitions])


def fetch_v4_body(topic: str, partition: int, offset: int, max_wait_ms: int = 0,
                  max_bytes: int = 1 << 20) -> bytes:
    partitions = array([struct.pack(">iqi", partition, offset, max_bytes)])
    return struct.pack(">iiiib", -1, max_wait_ms, 1, max_bytes, 0) + array(
        [string(topic) + partitions]
    )


# --- decoding --------------------------------------------------------------


class Reader:
    def __init__(self, data: bytes):
        self.data = data
        self.position = 0

    def take(self, count: int) -> bytes:
        if self.position + count > len(self.data):
            raise ValueError(f"short response: need {count} bytes at {self.position}")
        chunk = self.data[self.position:self.position + count]
        self.position += count
        return chunk

    def unpack(self, fmt: str):
        size = struct.calcsize(fmt)
        return struct.unpack(fmt, self.take(size))

    def int8(self):
        return self.unpack(">b")[0]

    def int16(self):
        return self.unpack(">h")[0]

    def int32(self):
        return self.unpack(">i")[0]

    def int64(self):
        return self.unpack(">q")[0]

    def string(self):
        length = self.int16()
        return None if length < 0 else self.take(length).decode()

    def nullable_bytes(self):
        length = self.int32()
        return None if length < 0 else self.take(length)

    def array(self, item):
        count = self.int32()
        return None if count < 0 else [item(self) for _ in range(count)]

    def done(self):
        assert self.position == len(self.data), (
            f"{len(self.data) - self.position} trailing bytes in the response"
        )


def decode_api_versions_v0(body: bytes):
    reader = Reader(body)
    error_code = reader.int16()
    versions = reader.array(lambda r: r.unpack(">hhh"))
    reader.done()
    return error_code, versions


def decode_produce_v3(body: bytes):
    """[(topic, partition, error_code, base_offset, log_append_time)]"""
    reader = Reader(body)
    out = []
    for name, partitions in reader.array(lambda r: (r.string(), r.array(lambda p: p.unpack(">ihqq")))):
        for index, error_code, base_offset, append_time in partitions:
            out.append((name, index, error_code, base_offset, append_time))
    reader.int32()  # throttle time
    reader.done()
    return out


def decode_list_offsets_v1(body: bytes):
    """[(topic, partition, error_code, timestamp, offset)]"""
    reader = Reader(body)
    out = []
    for name, partitions in reader.array(lambda r: (r.string(), r.array(lambda p: p.unpack(">ihqq")))):
        for index, error_code, timestamp, offset in partitions:
            out.append((name, index, error_code, timestamp, offset))
    reader.done()
    return out


def decode_fetch_v4(body: bytes):
    """[(topic, partition, error_code, high_watermark, records)]"""
    reader = Reader(body)
    reader.int32()  # throttle time

    def partition(r):
        index, error_code, high_watermark, _last_stable = r.unpack(">ihqq")
        r.array(lambda a: a.unpack(">qq"))  # aborted transactions
        return index, error_code, high_watermark, r.nullable_bytes()

    out = []
    for name, partitions in reader.array(lambda r: (r.string(), r.array(partition))):
        for index, error_code, high_watermark, records in partitions:
            out.append((name, index, error_code, high_watermark, records))
    reader.done()
    return out


# --- connection ------------------------------------------------------------


class Connection:
    """A blocking socket that speaks framed requests and responses."""

    def __init__(self, port: int, timeout_s: float = 10.0, host: str = "127.0.0.1"):
        self.sock = socket.create_connection((host, port), timeout=timeout_s)

    def close(self):
        self.sock.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def send_raw(self, data: bytes):
        self.sock.sendall(data)

    def send(self, api_key: int, api_version: int, correlation_id: int, body: bytes):
        self.send_raw(request_frame(api_key, api_version, correlation_id, body))

    def read_exact(self, count: int) -> bytes:
        chunks = bytearray()
        while len(chunks) < count:
            chunk = self.sock.recv(count - len(chunks))
            if not chunk:
                raise ConnectionError("connection closed by the broker")
            chunks += chunk
        return bytes(chunks)

    def receive(self):
        """(correlation_id, body) of the next response (header v0)."""
        (length,) = struct.unpack(">i", self.read_exact(4))
        payload = self.read_exact(length)
        (correlation_id,) = struct.unpack(">i", payload[:4])
        return correlation_id, payload[4:]

    def call(self, api_key: int, api_version: int, body: bytes, correlation_id: int = 7):
        self.send(api_key, api_version, correlation_id, body)
        received_id, response = self.receive()
        assert received_id == correlation_id
        return response

    def closed_by_peer(self, timeout_s: float = 5.0) -> bool:
        """True when the broker closes the connection (EOF or reset) in time
        without answering anything first."""
        self.sock.settimeout(timeout_s)
        try:
            data = self.sock.recv(65536)
        except (ConnectionResetError, BrokenPipeError):
            return True
        except socket.timeout:
            return False
        assert not data, f"the broker answered before closing: {data[:64]!r}"
        return True
