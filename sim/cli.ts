// Command-line helpers shared by the simulators.

/** `--name value` / `--name=value` flags; anything not in `allowed` is an error naming it. */
export function parseFlags(argv: string[], allowed: string[]): Record<string, string> {
  const a: Record<string, string> = {};
  for (let i = 0; i < argv.length; i++) {
    const m = /^--([a-z-]+)(?:=(.*))?$/.exec(argv[i]);
    if (!m) throw new Error(`unknown argument ${argv[i]}`);
    a[m[1]] = m[2] ?? argv[++i] ?? '';
  }
  for (const k of Object.keys(a)) if (!allowed.includes(k)) throw new Error(`unknown option --${k} (allowed: ${allowed.map((x) => '--' + x).join(' ')})`);
  return a;
}

/** "host:port", "[v6]:port" or a bare "port" (host 127.0.0.1) */
export function hostPort(v: string, flag: string): { host: string; port: number } {
  if (/^\d+$/.test(v)) {
    const port = Number(v);
    if (port > 65535) throw new Error(`${flag}: port out of range: ${v}`);
    return { host: '127.0.0.1', port };
  }
  const i = v.lastIndexOf(':');
  const port = Number(v.slice(i + 1));
  if (i <= 0 || !Number.isInteger(port) || port < 0 || port > 65535) throw new Error(`${flag}: expected host:port, got ${v}`);
  return { host: v.slice(0, i).replace(/^\[(.*)\]$/, '$1'), port };
}
