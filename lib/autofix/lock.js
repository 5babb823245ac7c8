'use strict';

// In-process serialisation: one promise chain per key (a file, an audit log).

const locks = new Map();

/** Runs `fn` after every earlier call with the same key has finished, in call order. */
async function withLock(key, fn) {
  const previous = locks.get(key) || Promise.resolve();
  let release;
  const mine = new Promise((resolve) => {
    release = resolve;
  });
  const tail = previous.then(() => mine);
  locks.set(key, tail);
  await previous;
  try {
    return await fn();
  } finally {
    release();
    if (locks.get(key) === tail) locks.delete(key);
  }
}

module.exports = { withLock };
