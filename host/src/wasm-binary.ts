// Minimal reader of a Wasm binary's type and import sections, so the host can check import
// signatures at load time like proxy-wasm-cpp-host's V8::link does (Node's WebAssembly API does
// not expose import types).

export interface ImportInfo {
  module: string;
  name: string;
  kind: 'function' | 'table' | 'memory' | 'global' | 'tag';
  /** For functions: signature as 'params->results' with i=i32, I=i64, f=f32, F=f64, v=v128, r=ref. */
  signature?: string;
}

const VALTYPE: Record<number, string> = { 0x7f: 'i', 0x7e: 'I', 0x7d: 'f', 0x7c: 'F', 0x7b: 'v', 0x70: 'r', 0x6f: 'r' };

class Reader {
  pos: number;
  constructor(private readonly b: Uint8Array, pos = 0) {
    this.pos = pos;
  }
  byte(): number {
    if (this.pos >= this.b.length) throw new Error('unexpected end of wasm binary');
    return this.b[this.pos++];
  }
  u32(): number {
    let result = 0;
    let shift = 0;
    for (;;) {
      const byte = this.byte();
      result |= (byte & 0x7f) << shift;
      if ((byte & 0x80) === 0) break;
      shift += 7;
      if (shift > 35) throw new Error('bad LEB128 in wasm binary');
    }
    return result >>> 0;
  }
  name(): string {
    const len = this.u32();
    const s = Buffer.from(this.b.buffer, this.b.byteOffset + this.pos, len).toString('utf8');
    this.pos += len;
    return s;
  }
  limits(): void {
    const flags = this.byte();
    this.u32();
    if (flags & 1) this.u32();
  }
}

export function readImports(bytes: Uint8Array): ImportInfo[] {
  if (bytes.length < 8 || bytes[0] !== 0 || bytes[1] !== 0x61 || bytes[2] !== 0x73 || bytes[3] !== 0x6d) {
    throw new Error('not a wasm binary (bad magic)');
  }
  const r = new Reader(bytes, 8);
  const types: string[] = [];
  const imports: ImportInfo[] = [];
  while (r.pos < bytes.length) {
    const id = r.byte();
    const size = r.u32();
    const end = r.pos + size;
    if (id === 1) {
      const n = r.u32();
      for (let i = 0; i < n; i++) {
        const form = r.byte();
        if (form !== 0x60) throw new Error(`unsupported type form 0x${form.toString(16)}`);
        let params = '';
        let results = '';
        const np = r.u32();
        for (let j = 0; j < np; j++) params += VALTYPE[r.byte()] ?? '?';
        const nr = r.u32();
        for (let j = 0; j < nr; j++) results += VALTYPE[r.byte()] ?? '?';
        types.push(`${params}->${results}`);
      }
    } else if (id === 2) {
      const n = r.u32();
      for (let i = 0; i < n; i++) {
        const module = r.name();
        const name = r.name();
        const kind = r.byte();
        if (kind === 0) {
          const t = r.u32();
          imports.push({ module, name, kind: 'function', signature: types[t] });
        } else if (kind === 1) {
          r.byte();
          r.limits();
          imports.push({ module, name, kind: 'table' });
        } else if (kind === 2) {
          r.limits();
          imports.push({ module, name, kind: 'memory' });
        } else if (kind === 3) {
          r.byte();
          r.byte();
          imports.push({ module, name, kind: 'global' });
        } else if (kind === 4) {
          r.byte();
          r.u32();
          imports.push({ module, name, kind: 'tag' });
        } else {
          throw new Error(`unknown import kind ${kind}`);
        }
      }
      return imports;
    }
    r.pos = end;
  }
  return imports;
}
