// The documents worker VMs exchange through shared data (in-flight counts, the prefix index) are
// one section per VM, back to back: a writer keeps the other VMs' live sections and appends its own.

/** The sections, concatenated in order, as one document. */
export function concatSections(sections: Array<ArrayBuffer>): ArrayBuffer {
  let size = 0;
  for (let i = 0; i < sections.length; i++) size += sections[i].byteLength;
  const out = new ArrayBuffer(size);
  let o: usize = 0;
  for (let i = 0; i < sections.length; i++) {
    memory.copy(changetype<usize>(out) + o, changetype<usize>(sections[i]), sections[i].byteLength);
    o += <usize>sections[i].byteLength;
  }
  return out;
}
