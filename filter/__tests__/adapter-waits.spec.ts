// Critical requests waiting for their LoRA adapter (lib/choice/adapter-waits.ts), and the pick
// rule built on it: under overload, other adapters' non-critical requests are held back.
import { Inflight } from "../assembly/lib/inflight";
import { AdapterWaits } from "../assembly/lib/choice/adapter-waits";

describe("AdapterWaits", () => {
  it("holds other adapters back from a slot while a critical request waits there, until it is answered", () => {
    const f = new Inflight();
    const a = f.slotFor("10.0.0.1:80"), b = f.slotFor("10.0.0.2:80");
    const w = new AdapterWaits(f);
    expect(w.holds(a, "chat-lora")).toBe(false);
    const h1 = f.acquire(a);
    w.begin(h1, "sql-lora");
    expect(w.waitingAt(a)).toBe(1);
    expect(w.holds(a, "chat-lora")).toBe(true);
    expect(w.holds(a, "sql-lora")).toBe(false); // its own adapter joins it
    expect(w.holds(b, "chat-lora")).toBe(false);
    // two waiting: held until both are answered; an extra end changes nothing
    const h2 = f.acquire(a);
    w.begin(h2, "sql-lora");
    w.end(h1, "sql-lora");
    expect(w.holds(a, "chat-lora")).toBe(true);
    w.end(h2, "sql-lora");
    expect(w.holds(a, "chat-lora")).toBe(false);
    w.end(h2, "sql-lora");
    expect(w.waitingAt(a)).toBe(0);
    // no hold, nothing recorded
    w.begin(-1, "x");
    w.end(-1, "x");
    expect(w.waitingAt(b)).toBe(0);
  });

  it("several adapters waiting at a slot: each joins, a third is held back; one answered leaves the other", () => {
    const f = new Inflight();
    const a = f.slotFor("10.0.0.1:80");
    const w = new AdapterWaits(f);
    const hs = f.acquire(a), hc = f.acquire(a);
    w.begin(hs, "sql-lora");
    w.begin(hc, "chat-lora");
    expect(w.holds(a, "sql-lora")).toBe(false);
    expect(w.holds(a, "chat-lora")).toBe(false);
    expect(w.holds(a, "code-lora")).toBe(true);
    // the chat-lora one answered: chat-lora is now held back, sql-lora still joins
    w.end(hc, "chat-lora");
    expect(w.holds(a, "chat-lora")).toBe(true);
    expect(w.holds(a, "sql-lora")).toBe(false);
    expect(w.waitingAt(a)).toBe(1);
  });

  it("a slot freed and reused starts afresh: the old request's wait neither holds nor ends the new one's", () => {
    const f = new Inflight();
    f.beginEpoch();
    const a = f.slotFor("10.0.0.1:80");
    const w = new AdapterWaits(f);
    const old = f.acquire(a);
    w.begin(old, "sql-lora");
    // the address leaves the plans and its slot is freed, then reused by another address
    f.beginEpoch();
    f.sweep(0, 0);
    expect(f.sweep(1, 0)).toBe(1);
    const again = f.slotFor("10.0.0.9:80");
    expect(again).toBe(a);
    expect(w.waitingAt(again)).toBe(0);
    expect(w.holds(again, "chat-lora")).toBe(false);
    const fresh = f.acquire(again);
    w.begin(fresh, "code-lora");
    w.end(old, "sql-lora"); // the old generation: nothing
    expect(w.waitingAt(again)).toBe(1);
    expect(w.holds(again, "chat-lora")).toBe(true);
  });
});
