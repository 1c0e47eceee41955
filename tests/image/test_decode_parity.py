"""Decoding equals what transformers' processor sees: PIL's Image.open then its convert_to_rgb
(transparency composited onto white). Every format, colour mode and bit depth the Debian libraries
and PIL both read, byte for byte; corrupt, truncated and oversized inputs are clear errors."""
import io

import numpy as np
import pytest
from PIL import Image

from image_reference import QWEN3_5_CONFIG, reference_rgb, run_prepare, sanctum_outputs

W, H = 37, 23  # odd sizes: no codec block or row alignment hides a bug


def rgb(rng):
    y, x = np.mgrid[0:H, 0:W]
    a = np.stack([x * 7 % 256, y * 11 % 256, (x * y) % 256], axis=-1)
    return np.clip(a + rng.integers(-20, 21, size=a.shape), 0, 255).astype(np.uint8)


def alpha(rng):
    a = rng.integers(0, 256, size=(H, W), dtype=np.uint8)
    a[:, :5] = 0
    a[:, 5:10] = 255
    return a


def png_images(rng):
    c = rgb(rng)
    g = c[..., 0]
    yield "rgb8", Image.fromarray(c, "RGB"), {}
    yield "rgba8", Image.fromarray(np.dstack([c, alpha(rng)]), "RGBA"), {}
    yield "gray8", Image.fromarray(g, "L"), {}
    yield "gray_alpha8", Image.fromarray(np.dstack([g, alpha(rng)]), "LA"), {}
    yield "gray1", Image.fromarray(g > 128), {}
    yield "gray16", Image.fromarray(g.astype(np.uint16) * 3), {}  # PIL clips these at 255
    pal = Image.fromarray(c, "RGB").quantize(colors=50)
    yield "palette", pal, {}
    yield "palette_trns", pal, {"transparency": 3}
    yield "gray_trns", Image.fromarray(g, "L"), {"transparency": int(g[4, 4])}
    yield "rgb_trns", Image.fromarray(c, "RGB"), {"transparency": tuple(int(v) for v in c[2, 2])}
    yield "interlaced_rgb", Image.fromarray(c, "RGB"), {"interlace": True}


def cases():
    rng = np.random.default_rng(0)
    for name, im, kw in png_images(rng):
        b = io.BytesIO()
        if kw.pop("interlace", False):
            # PIL writes no interlaced PNG; build one through the raw rows and the zlib stream instead.
            b = interlaced_png(np.array(im))
        else:
            im.save(b, format="PNG", **kw)
        yield f"png_{name}", b.getvalue()
    c = rgb(rng)
    for name, kw, mode in [("q90", {"quality": 90}, "RGB"), ("444", {"quality": 95, "subsampling": 0}, "RGB"),
                           ("422", {"quality": 80, "subsampling": 1}, "RGB"), ("progressive", {"progressive": True}, "RGB"),
                           ("gray", {"quality": 85}, "L"), ("cmyk", {"quality": 90}, "CMYK")]:
        b = io.BytesIO()
        Image.fromarray(c, "RGB").convert(mode).save(b, format="JPEG", **kw)
        yield f"jpeg_{name}", b.getvalue()
    for name, kw, mode in [("lossy", {"quality": 80}, "RGB"), ("lossless", {"lossless": True}, "RGB"),
                           ("lossy_alpha", {"quality": 70}, "RGBA"), ("lossless_alpha", {"lossless": True}, "RGBA")]:
        src = Image.fromarray(np.dstack([c, alpha(rng)]), "RGBA").convert(mode)
        b = io.BytesIO()
        src.save(b, format="WEBP", **kw)
        yield f"webp_{name}", b.getvalue()
    b = io.BytesIO()
    moving = [Image.fromarray(np.roll(c, 3 * k, axis=0), "RGB") for k in range(3)]
    moving[0].save(b, format="WEBP", save_all=True, append_images=moving[1:], duration=40, lossless=True)
    yield "webp_animated", b.getvalue()
    pal = Image.fromarray(c, "RGB").quantize(colors=64)
    for name, kw in [("plain", {}), ("transparent", {"transparency": 5}), ("interlaced", {"interlace": True})]:
        b = io.BytesIO()
        pal.save(b, format="GIF", **kw)
        yield f"gif_{name}", b.getvalue()
    b = io.BytesIO()
    frames = [Image.fromarray(np.roll(c, k, axis=1), "RGB").quantize(colors=32) for k in range(3)]
    frames[0].save(b, format="GIF", save_all=True, append_images=frames[1:], duration=50)
    yield "gif_animated", b.getvalue()
    b = io.BytesIO()
    gray = Image.fromarray(c[..., 1], "L")
    gray.save(b, format="GIF")
    yield "gif_gray", b.getvalue()


def interlaced_png(a):
    import struct
    import zlib

    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    h, w, _ = a.shape
    raw = b""
    for x0, y0, dx, dy in [(0, 0, 8, 8), (4, 0, 8, 8), (0, 4, 4, 8), (2, 0, 4, 4), (0, 2, 2, 4), (1, 0, 2, 2), (0, 1, 1, 2)]:
        sub = a[y0::dy, x0::dx]
        if sub.size:
            raw += b"".join(b"\x00" + row.tobytes() for row in sub)
    out = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 1))
    out += chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b"")
    return io.BytesIO(out)


CASES = dict(cases())


@pytest.mark.parametrize("name", list(CASES))
def test_decoded_rgb_equals_pil_convert(tmp_path, name):
    path = tmp_path / name
    path.write_bytes(CASES[name])
    want = reference_rgb(path)
    _, got, _ = sanctum_outputs(path, QWEN3_5_CONFIG, tmp_path)
    assert got.shape == want.shape
    bad = np.argwhere(got != want)
    assert bad.size == 0, f"{len(bad)} values differ, first at {bad[0].tolist()}: {got[tuple(bad[0])]} vs {want[tuple(bad[0])]}"


def error_of(tmp_path, data, *extra):
    path = tmp_path / "bad"
    path.write_bytes(data)
    meta = run_prepare(path, QWEN3_5_CONFIG, None, *extra)
    assert "error" in meta, f"expected an error, got {meta}"
    return meta


@pytest.mark.parametrize("name", ["png_rgb8", "jpeg_q90", "webp_lossy", "gif_plain", "png_palette_trns"])
@pytest.mark.parametrize("keep", [0.3, 0.6, 0.9])
def test_truncated_input_is_an_error(tmp_path, name, keep):
    data = CASES[name]
    meta = error_of(tmp_path, data[: int(len(data) * keep)])
    assert meta["kind"] == "invalid" and "corrupt or truncated" in meta["error"]


def test_unknown_bytes_name_the_formats(tmp_path):
    meta = error_of(tmp_path, b"this is not an image at all")
    assert "PNG, JPEG, WebP or GIF" in meta["error"]


def test_corrupt_body_is_an_error(tmp_path):
    data = bytearray(CASES["png_rgb8"])
    data[60:90] = b"\xff" * 30  # inside IDAT: the CRC and the zlib stream break
    assert error_of(tmp_path, bytes(data))["kind"] == "invalid"


def test_pixel_limit_is_checked_from_the_header(tmp_path):
    b = io.BytesIO()
    Image.new("RGB", (300, 200)).save(b, format="PNG")
    meta = error_of(tmp_path, b.getvalue(), "--max-image-pixels", "59999")
    assert meta["kind"] == "limit" and "--max-image-pixels" in meta["error"] and "300x200" in meta["error"]
    assert "error" not in run_prepare(tmp_path / "bad", QWEN3_5_CONFIG, None, "--max-image-pixels", "60000")


def test_huge_declared_size_is_refused_before_allocation(tmp_path):
    import struct
    import zlib

    # A 60000 x 60000 PNG header with a tiny body: refused at the header, never allocated.
    ihdr = struct.pack(">IIBBBBB", 60000, 60000, 8, 2, 0, 0, 0)
    data = b"\x89PNG\r\n\x1a\n" + struct.pack(">I", 13) + b"IHDR" + ihdr + struct.pack(">I", zlib.crc32(b"IHDR" + ihdr))
    assert error_of(tmp_path, data)["kind"] == "limit"
