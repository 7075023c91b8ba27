// WASI (the subset Envoy's modules use: fd_write to the log, clocks, random, proc_exit, empty
// args/environ, sched_yield) and the C runtime calls cpp-host registers in env. Other WASI
// functions are known imports without an implementation: they throw naming themselves.

import { randomFillSync } from 'node:crypto';
import { WASI_MODULES } from '../abi';
import { ProcExit } from '../context';
import type { WasmVm } from '../vm';
import type { ImportFn, ImportTable, Register } from './table';

export function registerRuntime(vm: WasmVm, env: Register, F: ImportTable): void {
  const o = vm.owner;
  env('pthread_equal', (a: number, b: number) => { return a === b ? 1 : 0; });
  env('emscripten_notify_memory_growth', (_i: number) => { });



  for (const m of WASI_MODULES) {
    const w = (name: string, f: ImportFn) => { F[`${m}.${name}`] = f; };
    w('fd_write', (fd: number, iovs: number, iovsLen: number, nwrittenPtr: number) => {
      const c = vm.ctx();
      const level = fd === 1 ? 2 : fd === 2 ? 4 : -1;
      if (level < 0) return 8; // EBADF
      let s = '';
      let total = 0;
      for (let i = 0; i < (iovsLen >>> 0); i++) {
        const iov = vm.view(iovs + i * 8, 8);
        if (!iov) return 21; // EFAULT
        const p = iov.readUInt32LE(0);
        const l = iov.readUInt32LE(4);
        const d = vm.view(p, l);
        if (!d) return 21;
        s += d.toString('utf8');
        total += l;
      }
      if (s.length) vm.emit(level, 'wasm', c.id, s.endsWith('\n') ? s.slice(0, -1) : s);
      return vm.setU32(nwrittenPtr, total) ? 0 : 21;
    });
    w('clock_time_get', (id: number, _precision: bigint, resultPtr: number) => {
      let t: bigint;
      if (id === 0) t = o.clock.nowNs();
      else if (id === 1) t = o.clock.monoNs();
      else return 28; // EINVAL
      return vm.setU64(resultPtr, t) ? 0 : 21;
    });
    w('random_get', (ptr: number, len: number) => {
      len >>>= 0;
      if (len > 64 * 1024) return 28;
      if (len === 0) return 0;
      const d = vm.view(ptr, len);
      if (!d) return 21;
      randomFillSync(d);
      return 0;
    });
    w('proc_exit', (code: number) => {
      const c = vm.current;
      vm.emit(5, 'host', c?.id ?? 0, `wasi proc_exit(${code | 0}) called: the VM is stopped`);
      throw new ProcExit(code | 0);
    });
    const zero2 = (name: string) => w(name, (a: number, b: number) => {
      return vm.setU32(a, 0) && vm.setU32(b, 0) ? 0 : 21;
    });
    zero2('args_sizes_get');
    zero2('environ_sizes_get');
    w('args_get', (_a: number, _b: number) => { return 0; });
    w('environ_get', (_a: number, _b: number) => { return 0; });
    w('sched_yield', () => { return 0; });
  }
}
