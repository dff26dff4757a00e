// A Mapbox Vector Tile (spec 2.1) encoder: the protobuf of vector_tile.proto written by hand, for
// the two geometry types the map shows (points and lines). Coordinates come in already in tile
// units (0..extent, and the buffer beyond); they are rounded here and written as the spec's
// command integers with zigzag-encoded deltas. Encoding gives the event loop back between features
// (`pause`): a tile of many lines is milliseconds of work per thousand vertices, which other requests
// should not wait for.

export type TileValue = string | number | boolean;

export interface TileFeature {
  type: 'point' | 'line';
  /** point: one [x, y]; line: its parts, each a list of [x, y] */
  geometry: [number, number][] | [number, number][][];
  properties: Record<string, TileValue | null | undefined>;
}

export interface TileLayer {
  name: string;
  features: TileFeature[];
}

/** Called with the work done since its last call (vertices written); a promise when the caller should wait for it before going on. */
export type Pause = (work: number) => Promise<void> | undefined;

const GEOM_POINT = 1;
const GEOM_LINESTRING = 2;
const CMD_MOVE_TO = 1;
const CMD_LINE_TO = 2;

/** Protobuf wire format, only what vector_tile.proto needs (varints, length-delimited, doubles). */
class ProtoWriter {
  private buf: Buffer;
  length = 0;

  /** a feature's or a value's writer starts small: a tile has thousands of them */
  constructor(size = 64) {
    this.buf = Buffer.allocUnsafe(size);
  }

  private reserve(n: number): void {
    if (this.length + n <= this.buf.length) return;
    // unfilled: every byte up to length is written before finish() hands it out
    const next = Buffer.allocUnsafe(Math.max(this.buf.length * 2, this.length + n));
    this.buf.copy(next, 0, 0, this.length);
    this.buf = next;
  }

  varint(value: number): void {
    this.reserve(10);
    let v = value;
    // numbers up to 2^53: division, not 32-bit shifts
    while (v >= 0x80) {
      this.buf[this.length++] = (v % 0x80) | 0x80;
      v = Math.floor(v / 0x80);
    }
    this.buf[this.length++] = v;
  }

  tag(field: number, wireType: 0 | 1 | 2): void {
    this.varint((field << 3) | wireType);
  }

  bytes(field: number, data: Uint8Array): void {
    this.tag(field, 2);
    this.varint(data.length);
    this.reserve(data.length);
    this.buf.set(data, this.length);
    this.length += data.length;
  }

  string(field: number, text: string): void {
    // written in place: no Buffer per name and hashId of a tile's thousands of features
    const size = Buffer.byteLength(text, 'utf8');
    this.tag(field, 2);
    this.varint(size);
    this.reserve(size);
    this.length += this.buf.write(text, this.length, 'utf8');
  }

  uint(field: number, value: number): void {
    this.tag(field, 0);
    this.varint(value);
  }

  double(field: number, value: number): void {
    this.tag(field, 1);
    this.reserve(8);
    this.buf.writeDoubleLE(value, this.length);
    this.length += 8;
  }

  packed(field: number, values: number[]): void {
    let size = 0;
    for (const v of values) size += varintSize(v);
    this.tag(field, 2);
    this.varint(size);
    for (const v of values) this.varint(v);
  }

  finish(): Buffer {
    return this.buf.subarray(0, this.length);
  }
}

function varintSize(value: number): number {
  let size = 1;
  for (let v = value; v >= 0x80; v = Math.floor(v / 0x80)) size++;
  return size;
}

const zigzag = (n: number) => (n >= 0 ? n * 2 : -n * 2 - 1);
const command = (id: number, count: number) => (id & 0x7) | (count << 3);

/** The command integers of a geometry; null when nothing is left to draw (a line shorter than one unit). `pause` is told of each part's points. */
async function geometryCommands(feature: TileFeature, pause: Pause): Promise<number[] | null> {
  const out: number[] = [];
  let cx = 0;
  let cy = 0;
  const moveBy = (x: number, y: number) => {
    out.push(zigzag(x - cx), zigzag(y - cy));
    cx = x;
    cy = y;
  };
  if (feature.type === 'point') {
    const [x, y] = (feature.geometry as [number, number][])[0];
    out.push(command(CMD_MOVE_TO, 1));
    moveBy(Math.round(x), Math.round(y));
    return out;
  }
  for (const part of feature.geometry as [number, number][][]) {
    // consecutive points that round to one place are one point: a LineTo never has a zero delta
    const points: [number, number][] = [];
    for (const [x, y] of part) {
      const p: [number, number] = [Math.round(x), Math.round(y)];
      const last = points[points.length - 1];
      if (!last || last[0] !== p[0] || last[1] !== p[1]) points.push(p);
    }
    const waited = pause(part.length);
    if (waited) await waited;
    if (points.length < 2) continue;
    out.push(command(CMD_MOVE_TO, 1));
    moveBy(points[0][0], points[0][1]);
    out.push(command(CMD_LINE_TO, points.length - 1));
    for (const [x, y] of points.slice(1)) moveBy(x, y);
  }
  return out.length > 0 ? out : null;
}

function writeValue(value: TileValue): Buffer {
  const w = new ProtoWriter();
  if (typeof value === 'string') w.string(1, value);
  else if (typeof value === 'boolean') w.uint(7, value ? 1 : 0);
  else if (Number.isSafeInteger(value) && value >= 0) w.uint(5, value);
  else w.double(3, value);
  return w.finish();
}

async function writeLayer(layer: TileLayer, extent: number, pause: Pause): Promise<Buffer> {
  const w = new ProtoWriter(64 * 1024);
  w.uint(15, 2);
  w.string(1, layer.name);
  const keys = new Map<string, number>();
  // one index per value and type: 1 and '1' are two values
  const indexes = { string: new Map<TileValue, number>(), number: new Map<TileValue, number>(), boolean: new Map<TileValue, number>() };
  const valueList: TileValue[] = [];
  // one feature's bytes at a time, copied into the layer: the scratch writer is reused
  const f = new ProtoWriter(1024);
  const tags: number[] = [];
  for (const feature of layer.features) {
    const geometry = await geometryCommands(feature, pause);
    if (!geometry) continue;
    tags.length = 0;
    for (const key in feature.properties) {
      const value = feature.properties[key];
      // a vector tile has no null: an absent property is one not written
      if (value === null || value === undefined) continue;
      let keyIndex = keys.get(key);
      if (keyIndex === undefined) {
        keyIndex = keys.size;
        keys.set(key, keyIndex);
      }
      const index = indexes[typeof value as 'string' | 'number' | 'boolean'];
      let valueIndex = index.get(value);
      if (valueIndex === undefined) {
        valueIndex = valueList.length;
        index.set(value, valueIndex);
        valueList.push(value);
      }
      tags.push(keyIndex, valueIndex);
    }
    f.length = 0;
    if (tags.length > 0) f.packed(2, tags);
    f.uint(3, feature.type === 'point' ? GEOM_POINT : GEOM_LINESTRING);
    f.packed(4, geometry);
    w.bytes(2, f.finish());
  }
  for (const key of keys.keys()) w.string(3, key);
  for (const value of valueList) w.bytes(4, writeValue(value));
  w.uint(5, extent);
  return w.finish();
}

/** The tile's protobuf; layers without features are left out, as the spec allows. */
export async function encodeTile(layers: TileLayer[], extent: number, pause: Pause = () => undefined): Promise<Buffer> {
  const w = new ProtoWriter(64 * 1024);
  for (const layer of layers) if (layer.features.length > 0) w.bytes(3, await writeLayer(layer, extent, pause));
  return w.finish();
}
