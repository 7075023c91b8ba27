// Time, tick period and metrics (Envoy Context::defineMetric / incrementMetric / recordMetric /
// getMetric; Wasm::tickHandler re-arms the period).

import { METRIC_TYPE_MAX as METRIC_TYPE_MAX_, MetricType as MetricType_, WasmResult as WasmResult_ } from '../abi';
import type { WasmVm } from '../vm';
import type { Register } from './table';

const WasmResult = WasmResult_;
const MetricType = MetricType_;
const METRIC_TYPE_MAX = METRIC_TYPE_MAX_;

export function registerTimersAndMetrics(vm: WasmVm, env: Register): void {
  const o = vm.owner;
  const clock = o.clock;
  const asNumber = clock.nowNsNumber ? clock.nowNsNumber.bind(clock) : null;
  env('proxy_get_current_time_nanoseconds', (ptr: number) => {
    const n = asNumber === null ? -1 : asNumber();
    const ok = n >= 0 && n < 18446744073709551616 ? vm.setU64Number(ptr, n) : vm.setU64(ptr, clock.nowNs());
    return ok ? WasmResult.Ok : WasmResult.InvalidMemoryAccess;
  });
  env('proxy_set_tick_period_milliseconds', (period: number) => {
    vm.setTickPeriod(vm.ctx().rootContext.id, period >>> 0);
    return WasmResult.Ok;
  });  env('proxy_define_metric', (type: number, namePtr: number, nameSize: number, idPtr: number) => {
    vm.ctx();
    const name = vm.view(namePtr, nameSize);
    if (!name) return WasmResult.InvalidMemoryAccess;
    type >>>= 0;
    if (type > METRIC_TYPE_MAX) return WasmResult.BadArgument;
    // Envoy allocates a new id per definition (Wasm::next*MetricId, += 4); the stat itself is
    // shared by name across all VMs of the process.
    vm.nextMetric[type] = (vm.nextMetric[type] + 4) >>> 0;
    const id = vm.nextMetric[type];
    vm.metricIds.set(id, o.process.metrics.getOrCreate(type, name.toString('utf8')));
    return vm.setU32(idPtr, id) ? WasmResult.Ok : WasmResult.InvalidMemoryAccess;
  });
  env('proxy_increment_metric', (id: number, offset: bigint) => {
    vm.ctx();
    id >>>= 0;
    const t = id & 3;
    const m = vm.metricIds.get(id);
    if (t === MetricType.Counter) {
      if (!m) return WasmResult.NotFound;
      if (offset > 0n) {
        m.value = BigInt.asUintN(64, m.value + offset);
        return WasmResult.Ok;
      }
      return WasmResult.BadArgument;
    }
    if (t === MetricType.Gauge) {
      if (!m) return WasmResult.NotFound;
      m.value = BigInt.asUintN(64, m.value + offset);
      return WasmResult.Ok;
    }
    return WasmResult.BadArgument;
  });
  env('proxy_record_metric', (id: number, value: bigint) => {
    vm.ctx();
    id >>>= 0;
    const v = BigInt.asUintN(64, value);
    const m = vm.metricIds.get(id);
    if (!m) return WasmResult.NotFound;
    const t = id & 3;
    if (t === MetricType.Counter) m.value = BigInt.asUintN(64, m.value + v);
    else if (t === MetricType.Gauge) m.value = v;
    else if (t === MetricType.Histogram) o.process.metrics.recordHistogram(m, Number(v));
    else return WasmResult.NotFound;
    return WasmResult.Ok;
  });
  env('proxy_get_metric', (id: number, resultPtr: number) => {
    vm.ctx();
    id >>>= 0;
    const t = id & 3;
    if (t !== MetricType.Counter && t !== MetricType.Gauge) return WasmResult.BadArgument;
    const m = vm.metricIds.get(id);
    if (!m) return WasmResult.NotFound;
    return vm.setU64(resultPtr, m.value) ? WasmResult.Ok : WasmResult.InvalidMemoryAccess;
  });

}
