// The last bytes of a file, read without loading the rest: terminal logs
// replayed to a new viewer, the serial console quoted in an error.
import fs from 'node:fs';

/** Up to `maxBytes` from the end of `file`, not before `fromOffset`; empty when there is no such regular file. */
export function readFileTail(file: string, maxBytes: number, fromOffset = 0): Buffer {
  let fd: number;
  try {
    fd = fs.openSync(file, 'r');
  } catch {
    // No such file (never written, or not rotated yet): an empty tail.
    return Buffer.alloc(0);
  }
  try {
    const st = fs.fstatSync(fd);
    // Something else under the file's name (a folder, a device) is not ours to read.
    if (!st.isFile()) return Buffer.alloc(0);
    const start = Math.max(fromOffset, st.size - Math.max(0, maxBytes));
    const len = Math.max(0, st.size - start);
    const buf = Buffer.alloc(len);
    let off = 0;
    while (off < len) {
      const n = fs.readSync(fd, buf, off, len - off, start + off);
      if (n === 0) break;
      off += n;
    }
    return buf.subarray(0, off);
  } finally {
    fs.closeSync(fd);
  }
}
