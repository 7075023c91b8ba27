/**
 * Package build/switchyard.wasm as an OCI image that Istio's Wasm image fetcher
 * accepts, without Docker.
 *
 * Format: the "compat" variant of the Wasm image spec (solo-io/wasm
 * spec-compat.md), the one istio/pkg/wasm/imagefetcher.go tries first for OCI
 * manifests: a normal OCI image whose last (here: only) layer is an
 * `application/vnd.oci.image.layer.v1.tar+gzip` tarball containing a file named
 * `plugin.wasm`. (The other "oci" variant - a wasm-specific config media type
 * plus an uncompressed `application/vnd.module.wasm.content.layer.v1+wasm`
 * layer - is also accepted by Istio but needs two layers; compat is what
 * `docker build` of a `FROM scratch / COPY plugin.wasm ./` image produces.)
 *
 * Output (reproducible: fixed mtimes/owners, sorted entries, no timestamps):
 *   <out>/layout/                   OCI image layout (oci-layout, index.json, blobs/sha256/*)
 *   <out>/switchyard-oci.tar        the same layout as one tar (an "oci-archive")
 *   <out>/digests.json              { manifestDigest, layerDigest, configDigest, wasmSha256, ... }
 *
 * IMPORTANT for WasmPlugin.spec.sha256: for oci:// URLs Istio compares it with
 * the digest of the image MANIFEST (imagefetcher.go returns img.Digest(); cache.go
 * checks it against spec.sha256), not with the sha256 of the .wasm file. Push
 * with a tool that keeps the manifest bytes (crane/oras; skopeo with
 * --preserve-digests), otherwise the registry digest differs.
 *
 * Usage:
 *   tsx scripts/oci/build-oci.ts [--wasm build/switchyard.wasm] [--out build/oci]
 *                                [--tag 0.1.0] [--pin istio/base/wasmplugin.yaml]
 *                                [--pin-ecds istio/options/inference/envoyfilter-wasm.yaml]
 * --pin rewrites spec.sha256 (and the tag of spec.url) in that WasmPlugin file,
 * keeping its comments, and records the plugin.wasm sha256 in the annotation
 * switchyard.io/wasm-sha256 so test/packaging can rebuild and compare.
 */
import { createHash } from 'node:crypto';
import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { gzipSync, constants as zlibConstants } from 'node:zlib';
import YAML from 'yaml';

export const MEDIA_TYPES = {
  index: 'application/vnd.oci.image.index.v1+json',
  manifest: 'application/vnd.oci.image.manifest.v1+json',
  config: 'application/vnd.oci.image.config.v1+json',
  layer: 'application/vnd.oci.image.layer.v1.tar+gzip',
} as const;

/** File name Istio's compat extractor looks for (filepath.Base(h.Name) == "plugin.wasm"). */
export const PLUGIN_FILE = 'plugin.wasm';

export interface Descriptor {
  mediaType: string;
  digest: string;
  size: number;
  annotations?: Record<string, string>;
}

export interface OciBuildResult {
  layoutDir: string;
  archivePath: string;
  manifestDigest: string;
  layerDigest: string;
  configDigest: string;
  /** sha256 of the uncompressed layer tar (config rootfs.diff_ids[0]). */
  diffId: string;
  /** sha256 of plugin.wasm itself (what an http:// or file:// WasmPlugin would pin). */
  wasmSha256: string;
  tag: string;
  blobs: Map<string, Buffer>;
}

const sha256 = (b: Buffer): string => 'sha256:' + createHash('sha256').update(b).digest('hex');

/** Deterministic JSON: sorted keys at every level, no whitespace. */
export function canonicalJson(v: unknown): Buffer {
  const norm = (x: unknown): unknown => {
    if (Array.isArray(x)) return x.map(norm);
    if (x && typeof x === 'object') {
      const o: Record<string, unknown> = {};
      for (const k of Object.keys(x as object).sort()) o[k] = norm((x as Record<string, unknown>)[k]);
      return o;
    }
    return x;
  };
  return Buffer.from(JSON.stringify(norm(v)), 'utf8');
}

// ---------------------------------------------------------------- tar (ustar)

function octal(n: number, width: number): string {
  // width includes the trailing NUL
  const s = n.toString(8);
  if (s.length > width - 1) throw new Error(`tar: value ${n} does not fit ${width - 1} octal digits`);
  return s.padStart(width - 1, '0') + '\0';
}

function tarHeader(name: string, size: number, type: '0' | '5', mode: number): Buffer {
  if (Buffer.byteLength(name) > 100) throw new Error(`tar: name too long for ustar: ${name}`);
  const h = Buffer.alloc(512, 0);
  h.write(name, 0, 100, 'utf8');
  h.write(octal(mode, 8), 100, 8, 'ascii');
  h.write(octal(0, 8), 108, 8, 'ascii'); // uid
  h.write(octal(0, 8), 116, 8, 'ascii'); // gid
  h.write(octal(size, 12), 124, 12, 'ascii');
  h.write(octal(0, 12), 136, 12, 'ascii'); // mtime: epoch, for reproducibility
  h.write('        ', 148, 8, 'ascii'); // checksum placeholder (spaces)
  h.write(type, 156, 1, 'ascii');
  h.write('ustar\0', 257, 6, 'ascii');
  h.write('00', 263, 2, 'ascii');
  // uname/gname left empty, devmajor/devminor zero-filled
  h.write(octal(0, 8), 329, 8, 'ascii');
  h.write(octal(0, 8), 337, 8, 'ascii');
  let sum = 0;
  for (const byte of h) sum += byte;
  h.write(sum.toString(8).padStart(6, '0') + '\0 ', 148, 8, 'ascii');
  return h;
}

export interface TarEntry {
  name: string;
  /** undefined = directory */
  data?: Buffer;
}

/** Minimal deterministic ustar writer (regular files and directories only). */
export function makeTar(entries: TarEntry[]): Buffer {
  const parts: Buffer[] = [];
  for (const e of entries) {
    if (e.data === undefined) {
      parts.push(tarHeader(e.name.endsWith('/') ? e.name : e.name + '/', 0, '5', 0o755));
    } else {
      parts.push(tarHeader(e.name, e.data.length, '0', 0o644));
      parts.push(e.data);
      const pad = (512 - (e.data.length % 512)) % 512;
      if (pad) parts.push(Buffer.alloc(pad, 0));
    }
  }
  parts.push(Buffer.alloc(1024, 0)); // two zero blocks end the archive
  return Buffer.concat(parts);
}

/** gzip with a fixed header (mtime 0, no file name), fixed level. */
export function deterministicGzip(data: Buffer): Buffer {
  // Node writes mtime=0 and no FNAME; the OS byte is fixed per platform build of zlib.
  return gzipSync(data, { level: 9, memLevel: 9, strategy: zlibConstants.Z_DEFAULT_STRATEGY });
}

// ---------------------------------------------------------------- image

export function buildOciImage(wasm: Buffer, opts: { outDir: string; tag?: string; sourceAnnotation?: string }): OciBuildResult {
  if (wasm.length < 8 || wasm.readUInt32BE(0) !== 0x0061736d) {
    throw new Error('input is not a WebAssembly binary (missing \\0asm magic)');
  }
  const tag = opts.tag ?? '0.1.0';
  const blobs = new Map<string, Buffer>();
  const put = (b: Buffer): string => {
    const d = sha256(b);
    blobs.set(d, b);
    return d;
  };

  const layerTar = makeTar([{ name: PLUGIN_FILE, data: wasm }]);
  const diffId = sha256(layerTar);
  const layer = deterministicGzip(layerTar);
  const layerDigest = put(layer);

  // A standard OCI image config. Istio ignores it for the compat variant, but a
  // valid one keeps registries and tools (crane, skopeo, oras) happy.
  const config = canonicalJson({
    architecture: 'wasm',
    os: 'wasi',
    config: {},
    rootfs: { type: 'layers', diff_ids: [diffId] },
  });
  const configDigest = put(config);

  const annotations: Record<string, string> = {
    'org.opencontainers.image.title': 'switchyard',
    'org.opencontainers.image.description': 'Switchyard Proxy-Wasm filter (compat variant: layer holds plugin.wasm)',
    'org.opencontainers.image.version': tag,
  };
  if (opts.sourceAnnotation) annotations['org.opencontainers.image.source'] = opts.sourceAnnotation;

  const manifest = canonicalJson({
    schemaVersion: 2,
    mediaType: MEDIA_TYPES.manifest,
    config: { mediaType: MEDIA_TYPES.config, digest: configDigest, size: config.length },
    layers: [
      {
        mediaType: MEDIA_TYPES.layer,
        digest: layerDigest,
        size: layer.length,
        annotations: { 'org.opencontainers.image.title': PLUGIN_FILE },
      },
    ],
    annotations,
  });
  const manifestDigest = put(manifest);

  const index = canonicalJson({
    schemaVersion: 2,
    mediaType: MEDIA_TYPES.index,
    manifests: [
      {
        mediaType: MEDIA_TYPES.manifest,
        digest: manifestDigest,
        size: manifest.length,
        annotations: { 'org.opencontainers.image.ref.name': tag },
      },
    ],
  });
  const ociLayout = canonicalJson({ imageLayoutVersion: '1.0.0' });

  // Write the layout directory.
  const outDir = resolve(opts.outDir);
  const layoutDir = join(outDir, 'layout');
  rmSync(layoutDir, { recursive: true, force: true });
  mkdirSync(join(layoutDir, 'blobs', 'sha256'), { recursive: true });
  writeFileSync(join(layoutDir, 'oci-layout'), ociLayout);
  writeFileSync(join(layoutDir, 'index.json'), index);
  const sortedDigests = [...blobs.keys()].sort();
  for (const d of sortedDigests) writeFileSync(join(layoutDir, 'blobs', 'sha256', d.slice('sha256:'.length)), blobs.get(d)!);

  // And the same as one deterministic tar (oci-archive).
  const entries: TarEntry[] = [
    { name: 'blobs' },
    { name: 'blobs/sha256' },
    ...sortedDigests.map((d) => ({ name: `blobs/sha256/${d.slice(7)}`, data: blobs.get(d)! })),
    { name: 'index.json', data: index },
    { name: 'oci-layout', data: ociLayout },
  ];
  const archivePath = join(outDir, 'switchyard-oci.tar');
  writeFileSync(archivePath, makeTar(entries));

  const result: OciBuildResult = {
    layoutDir,
    archivePath,
    manifestDigest,
    layerDigest,
    configDigest,
    diffId,
    wasmSha256: sha256(wasm),
    tag,
    blobs,
  };
  writeFileSync(
    join(outDir, 'digests.json'),
    JSON.stringify(
      {
        tag,
        manifestDigest,
        layerDigest,
        configDigest,
        diffId,
        wasmSha256: result.wasmSha256,
        wasmPluginSha256: manifestDigest.slice(7),
      },
      null,
      2,
    ) + '\n',
  );
  return result;
}

/** Rewrite spec.sha256 (manifest digest, hex) and the tag of spec.url in a WasmPlugin YAML, keeping comments. */
export const WASM_SHA_ANNOTATION = 'switchyard.io/wasm-sha256';

export function pinWasmPlugin(file: string, manifestDigest: string, tag: string, wasmSha256: string): void {
  const doc = YAML.parseDocument(readFileSync(file, 'utf8'));
  const url = String(doc.getIn(['spec', 'url']) ?? '');
  const m = /^(oci:\/\/[^@]+?)(?::([A-Za-z0-9_][A-Za-z0-9._-]{0,127}))?$/.exec(url);
  if (!m) throw new Error(`${file}: spec.url is not an oci:// reference without digest: ${url}`);
  doc.setIn(['spec', 'url'], `${m[1]}:${tag}`);
  doc.setIn(['spec', 'sha256'], manifestDigest.replace(/^sha256:/, ''));
  // Which plugin.wasm this pin was made from (lets tests re-derive the digest).
  doc.setIn(['metadata', 'annotations', WASM_SHA_ANNOTATION], wasmSha256.replace(/^sha256:/, ''));
  writeFileSync(file, doc.toString());
}

/**
 * The same pin in an EnvoyFilter that delivers the filter through ECDS (istio/options/inference:
 * EXTENSION_CONFIG with vm_config.code.remote): its sha256 and the tag of its uri, keeping
 * comments. The WasmPlugin and this config must name the same image (a packaging test checks).
 */
export function pinEcdsWasm(file: string, manifestDigest: string, tag: string): void {
  const doc = YAML.parseDocument(readFileSync(file, 'utf8'));
  const patches = doc.getIn(['spec', 'configPatches']) as YAML.YAMLSeq | undefined;
  const i = (patches?.items ?? []).findIndex((p) => YAML.isMap(p) && p.get('applyTo') === 'EXTENSION_CONFIG');
  if (i < 0) throw new Error(`${file}: no EXTENSION_CONFIG patch`);
  const remote = ['spec', 'configPatches', i, 'patch', 'value', 'typed_config', 'config', 'vm_config', 'code', 'remote'];
  const uri = String(doc.getIn([...remote, 'http_uri', 'uri']) ?? '');
  const m = /^(oci:\/\/[^@]+?)(?::([A-Za-z0-9_][A-Za-z0-9._-]{0,127}))?$/.exec(uri);
  if (!m) throw new Error(`${file}: the remote uri is not an oci:// reference without digest: ${uri}`);
  doc.setIn([...remote, 'http_uri', 'uri'], `${m[1]}:${tag}`);
  doc.setIn([...remote, 'sha256'], manifestDigest.replace(/^sha256:/, ''));
  writeFileSync(file, doc.toString());
}

function parseArgs(argv: string[]): Record<string, string> {
  const out: Record<string, string> = {};
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (!a.startsWith('--')) throw new Error(`unexpected argument: ${a}`);
    const v = argv[i + 1];
    if (v === undefined || v.startsWith('--')) throw new Error(`${a} needs a value`);
    out[a.slice(2)] = v;
    i++;
  }
  return out;
}

if (require.main === module) {
  const args = parseArgs(process.argv.slice(2));
  const known = new Set(['wasm', 'out', 'tag', 'pin', 'pin-ecds', 'source']);
  for (const k of Object.keys(args)) if (!known.has(k)) throw new Error(`unknown option --${k}`);
  const wasmPath = resolve(args.wasm ?? 'build/switchyard.wasm');
  const res = buildOciImage(readFileSync(wasmPath), {
    outDir: args.out ?? 'build/oci',
    tag: args.tag,
    sourceAnnotation: args.source,
  });
  if (args.pin) pinWasmPlugin(args.pin, res.manifestDigest, res.tag, res.wasmSha256);
  if (args['pin-ecds']) pinEcdsWasm(args['pin-ecds'], res.manifestDigest, res.tag);
  const rel = (p: string): string => p.replace(resolve('.') + '/', '');
  console.log(`wasm          ${rel(wasmPath)} (${res.wasmSha256})`);
  console.log(`layout        ${rel(res.layoutDir)}`);
  console.log(`archive       ${rel(res.archivePath)}`);
  console.log(`tag           ${res.tag}`);
  console.log(`manifest      ${res.manifestDigest}   <- WasmPlugin spec.sha256 (without "sha256:")`);
  console.log(`layer         ${res.layerDigest}   (${MEDIA_TYPES.layer}, holds ${PLUGIN_FILE})`);
  console.log(`config        ${res.configDigest}`);
  if (args.pin) console.log(`pinned        ${args.pin}`);
  if (args['pin-ecds']) console.log(`pinned        ${args['pin-ecds']}`);
}
