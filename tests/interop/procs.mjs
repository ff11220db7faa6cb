// The host's processes as /proc shows them, for the tests that look at a
// sandbox from outside: each process's parent, and the processes below one.
import fs from 'node:fs';

const DEPTH_MAX = 64; // a chain of parents walked at most this far

// pid -> parent pid, for every process now
export function parents() {
  const parent = new Map();
  for (const p of fs.readdirSync('/proc').filter((x) => /^\d+$/.test(x))) {
    try {
      const st = fs.readFileSync(`/proc/${p}/stat`, 'utf8');
      parent.set(Number(p), Number(st.slice(st.lastIndexOf(')') + 2).split(' ')[1]));
    } catch { /* gone */ }
  }
  return parent;
}

// The processes below `top` (bounded walk up each chain).
export function descendants(top) {
  const parent = parents();
  return [...parent.keys()].filter((pid) => {
    let q = parent.get(pid);
    for (let depth = 0; depth < DEPTH_MAX && q > 1 && q !== top; depth++) q = parent.get(q);
    return q === top;
  });
}
