'use strict';
// Dotted version numbers ("2.28", "13.5", "1.2.4") compared numerically, part by part.

/** < 0, 0 or > 0 as `a` is older than, the same as or newer than `b`. */
function compareVersions(a, b) {
  const pa = a.split('.').map(Number);
  const pb = b.split('.').map(Number);
  for (let i = 0; i < Math.max(pa.length, pb.length); i++) {
    const d = (pa[i] || 0) - (pb[i] || 0);
    if (d) return d;
  }
  return 0;
}

module.exports = { compareVersions };
