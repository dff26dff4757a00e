// Web Mercator tile arithmetic (the XYZ scheme of slippy maps: tile 0/0/0 is the world, y grows
// southwards) and the clipping of lines to a tile with its buffer, in tile units.

export interface TileAddress {
  z: number;
  x: number;
  y: number;
}
export interface LonLatBox {
  west: number;
  south: number;
  east: number;
  north: number;
}

/** Web Mercator's latitude limit: the world is a square there */
const MAX_LAT = 85.0511287798066;

const lonOf = (x: number, n: number) => (x / n) * 360 - 180;
const latOf = (y: number, n: number) => (Math.atan(Math.sinh(Math.PI * (1 - (2 * y) / n))) * 180) / Math.PI;

/** The tile's area in degrees, grown by `buffer` tile units (of `extent`) on every side. */
export function tileBox({ z, x, y }: TileAddress, extent: number, buffer: number): LonLatBox {
  const n = 2 ** z;
  const b = buffer / extent;
  return { west: lonOf(x - b, n), east: lonOf(x + 1 + b, n), north: latOf(y - b, n), south: latOf(y + 1 + b, n) };
}

/** A [lon, lat] in the tile's units: (0, 0) its north-west corner, (extent, extent) its south-east. */
export function project([lon, lat]: [number, number], { z, x, y }: TileAddress, extent: number): [number, number] {
  const n = 2 ** z;
  const clamped = Math.max(-MAX_LAT, Math.min(MAX_LAT, lat));
  const sin = Math.sin((clamped * Math.PI) / 180);
  const wx = (lon + 180) / 360;
  const wy = 0.5 - Math.log((1 + sin) / (1 - sin)) / (4 * Math.PI);
  return [(wx * n - x) * extent, (wy * n - y) * extent];
}

/**
 * A line's [lon, lat] points in the tile's units, rounded to them (as the tile will hold them), a point on the
 * unit of the one before left out: zoomed out, a line traced every few metres is a few units long, and its
 * thousands of points need not be clipped one by one.
 */
export function projectLine(line: [number, number][], tile: TileAddress, extent: number): [number, number][] {
  const out: [number, number][] = [];
  let last: [number, number] | undefined;
  for (const p of line) {
    const [u, v] = project(p, tile, extent);
    const at: [number, number] = [Math.round(u), Math.round(v)];
    if (last && last[0] === at[0] && last[1] === at[1]) continue;
    out.push(at);
    last = at;
  }
  return out;
}

/**
 * The parts of a line inside the square [min, max]² (Liang–Barsky per segment): a line that leaves
 * the square and comes back becomes two parts.
 */
export function clipLine(points: [number, number][], min: number, max: number): [number, number][][] {
  const parts: [number, number][][] = [];
  let current: [number, number][] | null = null;
  for (let i = 1; i < points.length; i++) {
    const segment = clipSegment(points[i - 1], points[i], min, max);
    if (!segment) {
      current = null;
      continue;
    }
    const [a, b] = segment;
    const last = current?.[current.length - 1];
    if (!current || !last || last[0] !== a[0] || last[1] !== a[1]) {
      current = [a];
      parts.push(current);
    }
    current.push(b);
  }
  return parts;
}

function clipSegment(a: [number, number], b: [number, number], min: number, max: number): [[number, number], [number, number]] | null {
  const dx = b[0] - a[0];
  const dy = b[1] - a[1];
  let t0 = 0;
  let t1 = 1;
  // each side of the square as p·t <= q
  const sides: [number, number][] = [
    [-dx, a[0] - min],
    [dx, max - a[0]],
    [-dy, a[1] - min],
    [dy, max - a[1]],
  ];
  for (const [p, q] of sides) {
    if (p === 0) {
      if (q < 0) return null;
      continue;
    }
    const t = q / p;
    if (p < 0) {
      if (t > t1) return null;
      if (t > t0) t0 = t;
    } else {
      if (t < t0) return null;
      if (t < t1) t1 = t;
    }
  }
  const at = (t: number): [number, number] => (t === 0 ? a : t === 1 ? b : [a[0] + t * dx, a[1] + t * dy]);
  return [at(t0), at(t1)];
}
