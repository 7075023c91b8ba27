// Preloaded into a child agent (NODE_OPTIONS=--require) to give it a wrong wall clock:
// Date.now() and new Date() run SWITCHYARD_TEST_CLOCK_OFFSET_MS ahead (or behind). Test-only.
const offset = Number(process.env.SWITCHYARD_TEST_CLOCK_OFFSET_MS || 0);
const RealDate = Date;
const realNow = RealDate.now.bind(RealDate);
class ShiftedDate extends RealDate {
  constructor(...args) {
    if (args.length === 0) super(realNow() + offset);
    else super(...args);
  }
  static now() {
    return realNow() + offset;
  }
}
globalThis.Date = ShiftedDate;
