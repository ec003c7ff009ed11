#!/usr/bin/env python3
"""Checks that a PNG is not blank, with the standard library only: decodes the image (8-bit
grey/RGB/RGBA, non-interlaced, as Chromium writes screenshots), and requires the luminance to
vary (standard deviation above MIN_STDDEV) and at least MIN_INK of the pixels to differ from the
commonest (background) colour. Prints the figures; exit 1 when blank, 2 when unreadable.

usage: png_not_blank.py FILE.png [MIN_STDDEV=8] [MIN_INK=0.03]
"""
import struct
import sys
import zlib


def decode(path):
    data = open(path, "rb").read()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        raise ValueError("not a PNG")
    pos, idat, width = 8, [], None
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + length]
        pos += 12 + length
        if kind == b"IHDR":
            width, height, depth, colour, _, _, interlace = struct.unpack(">IIBBBBB", body)
            if depth != 8 or interlace != 0 or colour not in (0, 2, 6):
                raise ValueError("unsupported PNG layout (depth %d, colour %d)" % (depth, colour))
            channels = {0: 1, 2: 3, 6: 4}[colour]
        elif kind == b"IDAT":
            idat.append(body)
        elif kind == b"IEND":
            break
    raw = zlib.decompress(b"".join(idat))
    stride = width * channels
    rows, prev = [], bytearray(stride)
    for y in range(height):
        f = raw[y * (stride + 1)]
        line = bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        if f == 1:
            for i in range(channels, stride):
                line[i] = (line[i] + line[i - channels]) & 255
        elif f == 2:
            line = bytearray((a + b) & 255 for a, b in zip(line, prev))
        elif f == 3:
            for i in range(stride):
                left = line[i - channels] if i >= channels else 0
                line[i] = (line[i] + ((left + prev[i]) >> 1)) & 255
        elif f == 4:
            for i in range(stride):
                a = line[i - channels] if i >= channels else 0
                b = prev[i]
                c = prev[i - channels] if i >= channels else 0
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                pred = a if pa <= pb and pa <= pc else (b if pb <= pc else c)
                line[i] = (line[i] + pred) & 255
        rows.append(line)
        prev = line
    return width, height, channels, rows


def main():
    path = sys.argv[1]
    min_stddev = float(sys.argv[2]) if len(sys.argv) > 2 else 8.0
    min_ink = float(sys.argv[3]) if len(sys.argv) > 3 else 0.03
    try:
        width, height, channels, rows = decode(path)
    except (OSError, ValueError, zlib.error, struct.error) as e:
        print("%s: unreadable: %s" % (path, e))
        return 2
    n, s, s2, counts = 0, 0.0, 0.0, {}
    for line in rows:
        for x in range(0, width * channels, channels):
            px = bytes(line[x:x + min(channels, 3)])
            counts[px] = counts.get(px, 0) + 1
            lum = sum(px) / len(px)
            n += 1
            s += lum
            s2 += lum * lum
    mean = s / n
    stddev = max(0.0, s2 / n - mean * mean) ** 0.5
    ink = 1.0 - max(counts.values()) / n
    print("%s: %dx%d, luminance mean %.1f stddev %.1f, %.1f%% of pixels off the background, "
          "%d colours" % (path, width, height, mean, stddev, 100 * ink, len(counts)))
    return 0 if stddev >= min_stddev and ink >= min_ink else 1


if __name__ == "__main__":
    sys.exit(main())
