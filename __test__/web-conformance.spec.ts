// Conformance of the web APIs inside the sandbox, written from their standards: the Encoding
// standard's labels, decoder error handling (one U+FFFD per maximal subpart), BOM sniffing
// and streaming; HTML's structured clone (what is kept, what is lost, what cannot be
// cloned); DOM event dispatch and AbortSignal; Web Crypto digests and HMAC against the
// published test vectors (FIPS 180-2 examples, RFC 4231, RFC 2202). Where Node implements the
// same standard, the sandbox's answer is compared with Node's own too. Both isolation modes.
import { describe, expect, it } from 'vitest';
import { createHash } from 'node:crypto';
import { runSandbox, type Isolation } from '..';
import { ok } from './support/results';

/** Runs `body` (an async function body) in Node: the same program as in the sandbox. */
async function inNode(body: string): Promise<unknown> {
  const AsyncFunction = Object.getPrototypeOf(async () => {}).constructor;
  return JSON.parse(JSON.stringify(await new AsyncFunction(body)()));
}

describe.each(['thread', 'process'] as const)('conformance (%s isolation)', (isolation: Isolation) => {
  const out = async (body: string) => ok(await runSandbox(`(async () => {${body}\n})()`, { web: true, isolation }));
  /** The sandbox's answer, which must be Node's and, when given, `expected`. */
  const same = async (body: string, expected?: unknown) => {
    const answer = await out(body);
    expect(answer).toEqual(await inNode(body));
    if (expected !== undefined) expect(answer).toEqual(expected);
    return answer;
  };
  /** The standard's answer, where Node 20 differs from it (each case says how). */
  const standard = async (body: string, expected: unknown) => expect(await out(body)).toEqual(expected);

  describe('Encoding', () => {
    it('labels: case-insensitive, whitespace trimmed, aliases to names; unknown and replacement labels are RangeErrors', async () => {
      await same(
        `return ['utf8', ' UTF-8\\n', 'unicode-1-1-utf-8', 'unicode11utf8', 'latin1', 'ascii', 'iso-8859-1', 'cp1252', 'utf-16', 'UTF-16LE', 'utf-16be', 'iso-8859-2', 'koi8-r', 'windows-1251', 'x-mac-cyrillic']
          .map((l) => new TextDecoder(l).encoding);`,
        ['utf-8', 'utf-8', 'utf-8', 'utf-8', 'windows-1252', 'windows-1252', 'windows-1252', 'windows-1252', 'utf-16le', 'utf-16le', 'utf-16be', 'iso-8859-2', 'koi8-r', 'windows-1251', 'x-mac-cyrillic'],
      );
      await same(`return ['nope', 'replacement', 'iso-2022-kr', ''].map((l) => { try { new TextDecoder(l); return 'no error' } catch (e) { return e.constructor.name } });`, [
        'RangeError',
        'RangeError',
        'RangeError',
        'RangeError',
      ]);
    });

    it('UTF-8 decoding: one U+FFFD per maximal subpart of an ill-formed sequence', async () => {
      const cases = [
        [0xc0], [0xc1, 0xbf], [0xe2, 0x82], [0xe0, 0x80, 0x80], [0xed, 0xa0, 0x80], [0xf0, 0x90, 0x80], [0xf4, 0x90, 0x80, 0x80],
        [0xf5], [0xff, 0x41], [0x61, 0xe2, 0x82, 0x62], [0xf0, 0x9f, 0x98, 0x80], [0xef, 0xbb, 0xbf, 0x41],
      ];
      await same(`return ${JSON.stringify(cases)}.map((b) => [...new TextDecoder().decode(new Uint8Array(b))].map((c) => c.codePointAt(0)));`, [
        [0xfffd], [0xfffd, 0xfffd], [0xfffd], [0xfffd, 0xfffd, 0xfffd], [0xfffd, 0xfffd, 0xfffd], [0xfffd], [0xfffd, 0xfffd, 0xfffd, 0xfffd],
        [0xfffd], [0xfffd, 0x41], [0x61, 0xfffd, 0x62], [0x1f600], [0x41],
      ]);
      await same(`try { new TextDecoder('utf-8', { fatal: true }).decode(new Uint8Array([0x61, 0x80])) } catch (e) { return e.constructor.name }`, 'TypeError');
    });

    it('BOMs, UTF-16 and streaming across chunk boundaries', async () => {
      await same(`
        const d16 = new TextDecoder('utf-16le');
        const be = new TextDecoder('utf-16be');
        const keep = new TextDecoder('utf-8', { ignoreBOM: true });
        const s = new TextDecoder();
        const bytes = new TextEncoder().encode('a€😀b');
        let streamed = '';
        for (const b of bytes) streamed += s.decode(new Uint8Array([b]), { stream: true });
        streamed += s.decode();
        return [d16.decode(new Uint8Array([0xff, 0xfe, 0x41, 0x00, 0x3d, 0xd8])), be.decode(new Uint8Array([0xfe, 0xff, 0x00, 0x41])),
          [...keep.decode(new Uint8Array([0xef, 0xbb, 0xbf, 0x41]))].length, streamed,
          new TextDecoder('utf-16le').decode(new Uint8Array([0x41]))];`,
        ['A\ufffd', 'A', 2, 'a€😀b', '\ufffd'],
      );
      // The index of windows-1252 (Node 20 decodes these bytes to nothing).
      await standard(`return new TextDecoder('windows-1252').decode(new Uint8Array([0x41, 0x80, 0x81, 0x9f]));`, 'A€\u0081Ÿ');
    });

    it('TextEncoder: USVString conversion (lone surrogates become U+FFFD) and encodeInto of whole characters', async () => {
      await same(
        `const e = new TextEncoder();
         const d = new Uint8Array(5);
         const r = e.encodeInto('a😀b', d);
         return [[...e.encode('\\ud800x\\udc00')], r.read, r.written, [...d], e.encoding, [...e.encode()]];`,
        [[0xef, 0xbf, 0xbd, 0x78, 0xef, 0xbf, 0xbd], 3, 5, [0x61, 0xf0, 0x9f, 0x98, 0x80], 'utf-8', []],
      );
    });
  });

  describe('structured clone', () => {
    it('keeps types, cycles, shared buffers, -0, holes and errors; drops prototypes, getters (as values) and non-enumerables', async () => {
      await same(`
        const buf = new ArrayBuffer(4);
        const shared = { a: new Uint8Array(buf), b: new Uint16Array(buf, 2, 1) };
        const cyclic = { name: 'c' }; cyclic.self = cyclic;
        class Point { constructor() { this.x = 1 } get y() { return 2 } }
        const withGetter = Object.defineProperty({ v: 1 }, 'hidden', { value: 2, enumerable: false });
        const src = { date: new Date(5), re: /a+/gi, map: new Map([[1, { m: 1 }]]), set: new Set(['s']), big: 10n ** 20n, neg: -0, nan: NaN,
          holes: [1, , 3], boxed: new String('b'), err: new RangeError('r'), shared, cyclic, point: new Point(), withGetter, undef: undefined };
        const c = structuredClone(src);
        c.shared.a[2] = 7;
        return [c.date instanceof Date && c.date.getTime(), c.re.source + '/' + c.re.flags + '/' + c.re.lastIndex, c.map.get(1).m, [...c.set], String(c.big),
          Object.is(c.neg, -0), Number.isNaN(c.nan), 1 in c.holes, c.holes.length, c.boxed instanceof String && c.boxed.valueOf(),
          [c.err instanceof RangeError, c.err.message], c.shared.b[0], c.cyclic.self === c.cyclic, Object.getPrototypeOf(c.point) === Object.prototype,
          JSON.stringify(c.point), Object.keys(c.withGetter), 'undef' in c, c !== src];`,
        [5, 'a+/gi/0', 1, ['s'], '100000000000000000000', true, true, false, 3, 'b', [true, 'r'], 7, true, true, '{"x":1}', ['v'], true, true],
      );
    });

    it('what cannot be cloned is a DataCloneError DOMException (code 25)', async () => {
      await same(`
        const tries = [() => 1, Symbol('s'), new WeakMap(), { f() {} }, [Promise.resolve()]];
        return tries.map((v) => { try { structuredClone(v); return 'cloned' } catch (e) { return [e.name, e.code, e instanceof DOMException] } });`,
        Array(5).fill(['DataCloneError', 25, true]),
      );
    });
  });

  describe('DOM events and abort', () => {
    // Node 20 differs from the DOM standard here: at the target it runs listeners in the order
    // added whatever their capture flag, a passive listener can cancel, and a listener added
    // during a dispatch runs in it.
    it('dispatch at a target: capture listeners first, order kept, once, passive, handleEvent, stopImmediatePropagation, added/removed during dispatch', async () => {
      await standard(`
        const t = new EventTarget();
        const log = [];
        const late = () => log.push('added during dispatch');
        t.addEventListener('x', () => log.push('bubble 1'));
        t.addEventListener('x', () => log.push('capture'), { capture: true });
        t.addEventListener('x', (e) => { log.push('bubble 2'); t.addEventListener('x', late); t.removeEventListener('x', removed); }, { once: true });
        const removed = () => log.push('removed during dispatch');
        t.addEventListener('x', removed);
        t.addEventListener('x', { handleEvent(e) { log.push('handleEvent ' + (this !== t)) } });
        t.addEventListener('x', (e) => { e.preventDefault(); log.push('passive ' + e.defaultPrevented) }, { passive: true });
        const e1 = new Event('x', { cancelable: true });
        const r1 = t.dispatchEvent(e1);
        const r2 = t.dispatchEvent(new Event('x', { cancelable: true }));
        const s = new EventTarget();
        s.addEventListener('y', (e) => { e.stopImmediatePropagation(); log.push('first') });
        s.addEventListener('y', () => log.push('never'));
        s.dispatchEvent(new Event('y'));
        const c = new Event('z', { cancelable: true });
        s.addEventListener('z', (e) => { log.push([e.target === s, e.currentTarget === s, e.eventPhase, e.isTrusted]); e.preventDefault() });
        const r3 = s.dispatchEvent(c);
        return [log, r1, r2, r3, c.defaultPrevented, c.eventPhase, c.currentTarget, c.target === s];`,
        [
          ['capture', 'bubble 1', 'bubble 2', 'handleEvent true', 'passive false', 'capture', 'bubble 1', 'handleEvent true', 'passive false', 'added during dispatch', 'first', [true, true, 2, false]],
          true,
          true,
          false,
          true,
          0,
          null,
          true,
        ],
      );
    });

    // (Node 20 throws its own ERR_EVENT_RECURSION.)
    it('redispatching an event in dispatch is an InvalidStateError; CustomEvent carries detail', async () => {
      await standard(`
        const t = new EventTarget();
        let inner;
        t.addEventListener('x', (e) => { try { t.dispatchEvent(e) } catch (err) { inner = [err.name, err.code] } });
        t.dispatchEvent(new Event('x'));
        const ce = new CustomEvent('c', { detail: { n: 1 } });
        return [inner, ce.detail, new CustomEvent('d').detail, new Event('e').bubbles];`,
        [['InvalidStateError', 11], { n: 1 }, null, false],
      );
    });

    it('AbortController and AbortSignal: reasons, one abort event, any(), timeout(), listeners removed by signal', async () => {
      await same(`
        const log = [];
        const c = new AbortController();
        c.signal.addEventListener('abort', (e) => log.push(['abort', e.type, c.signal.reason.name]));
        c.signal.onabort = () => log.push('onabort');
        c.abort(); c.abort('again');
        const any = AbortSignal.any([new AbortController().signal, c.signal]);
        const later = new AbortController();
        const follows = AbortSignal.any([later.signal]);
        later.abort('later');
        const t = new EventTarget();
        const ls = new AbortController();
        t.addEventListener('x', () => log.push('listener'), { signal: ls.signal });
        t.dispatchEvent(new Event('x')); ls.abort(); t.dispatchEvent(new Event('x'));
        let thrown; try { AbortSignal.abort('r').throwIfAborted() } catch (e) { thrown = e }
        const timeout = await new Promise((r) => AbortSignal.timeout(10).addEventListener('abort', (e) => r([e.target.reason.name, e.target.reason.code])));
        return [log, c.signal.aborted, c.signal.reason.name, c.signal.reason.code, any.aborted, any.reason.name, follows.reason, thrown, timeout,
          AbortSignal.abort().reason.message];`,
        [[['abort', 'abort', 'AbortError'], 'onabort', 'listener'], true, 'AbortError', 20, true, 'AbortError', 'later', 'r', ['TimeoutError', 23], 'This operation was aborted'],
      );
    });
  });

  describe('Web Crypto', () => {
    // FIPS 180-2 example vectors ("abc", the 448-bit message, and one million 'a').
    const MESSAGES = ['abc', '', 'abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq'];
    const VECTORS: Record<string, string[]> = {
      'SHA-1': ['a9993e364706816aba3e25717850c26c9cd0d89d', 'da39a3ee5e6b4b0d3255bfef95601890afd80709', '84983e441c3bd26ebaae4aa1f95129e5e54670f1'],
      'SHA-256': [
        'ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad',
        'e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855',
        '248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1',
      ],
      'SHA-384': [
        'cb00753f45a35e8bb5a03d699ac65007272c32ab0eded1631a8b605a43ff5bed8086072ba1e7cc2358baeca134c825a7',
        '38b060a751ac96384cd9327eb1b1e36a21fdb71114be07434c0cc7bf63f6e1da274edebfe76f65fbd51ad2f14898b95b',
        '3391fdddfc8dc7393707a65b1b4709397cf8b1d162af05abfe8f450de5f36bc6b0455a8520bc4e6f5fe95b1fe3c8452b',
      ],
      'SHA-512': [
        'ddaf35a193617abacc417349ae20413112e6fa4e89a97ea20a9eeee64b55d39a2192992a274fc1a836ba3c23a3feebbd454d4423643ce80e2a9ac94fa54ca49f',
        'cf83e1357eefb8bdf1542850d66d8007d620e4050b5715dc83f4a921d36ce9ce47d0d13c5d85f2b0ff8318d2877eec2f63b931bd47417a81a538327af927da3e',
        '204a8fc6dda82f0a0ced7beb8e08a41657c16ef468b228a8279be331a703c33596fd15c13b1b07f9aa1d3bea57789ca031ad85c7a71dd70354ec631238ca3445',
      ],
    };
    const hex = `(b) => [...new Uint8Array(b)].map((x) => x.toString(16).padStart(2, '0')).join('')`;

    it('digest: the FIPS 180-2 example vectors for SHA-1, SHA-256, SHA-384 and SHA-512', async () => {
      const r = await out(`
        const hex = ${hex};
        const out = {};
        for (const alg of ${JSON.stringify(Object.keys(VECTORS))}) {
          out[alg] = [];
          for (const m of ${JSON.stringify(MESSAGES)}) out[alg].push(hex(await crypto.subtle.digest(alg, new TextEncoder().encode(m))));
        }
        out.million = hex(await crypto.subtle.digest({ name: 'sha-256' }, new TextEncoder().encode('a'.repeat(1000000))));
        const view = new Uint8Array([0, 97, 98, 99, 0]).subarray(1, 4);
        out.view = hex(await crypto.subtle.digest('SHA-256', view));
        try { await crypto.subtle.digest('MD5', view) } catch (e) { out.md5 = [e.name, e instanceof DOMException] }
        return out;`);
      expect(r).toEqual({
        ...VECTORS,
        million: 'cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0',
        view: VECTORS['SHA-256'][0],
        md5: ['NotSupportedError', true],
      });
      expect(createHash('sha256').update('a'.repeat(1000000)).digest('hex')).toBe((r as { million: string }).million);
    });

    it('HMAC: RFC 4231 test cases 1, 2 and 6 (SHA-256, SHA-384, SHA-512), RFC 2202 case 2 (SHA-1), verify', async () => {
      const r = await out(`
        const hex = ${hex};
        const enc = (s) => new TextEncoder().encode(s);
        const cases = [
          [new Uint8Array(20).fill(0x0b), enc('Hi There')],
          [enc('Jefe'), enc('what do ya want for nothing?')],
          [new Uint8Array(131).fill(0xaa), enc('Test Using Larger Than Block-Size Key - Hash Key First')],
        ];
        const out = {};
        for (const hash of ['SHA-256', 'SHA-384', 'SHA-512']) {
          out[hash] = [];
          for (const [k, m] of cases) {
            const key = await crypto.subtle.importKey('raw', k, { name: 'HMAC', hash }, false, ['sign', 'verify']);
            const sig = await crypto.subtle.sign('HMAC', key, m);
            out[hash].push([hex(sig), await crypto.subtle.verify('HMAC', key, sig, m), await crypto.subtle.verify('HMAC', key, new Uint8Array(sig.byteLength), m)]);
          }
        }
        const k1 = await crypto.subtle.importKey('raw', enc('Jefe'), { name: 'HMAC', hash: 'SHA-1' }, true, ['sign']);
        out.sha1 = hex(await crypto.subtle.sign('HMAC', k1, enc('what do ya want for nothing?')));
        return out;`);
      const v = (a: string, b: string, c: string) => [[a, true, false], [b, true, false], [c, true, false]];
      expect(r).toEqual({
        'SHA-256': v(
          'b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7',
          '5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843',
          '60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54',
        ),
        'SHA-384': v(
          'afd03944d84895626b0825f4ab46907f15f9dadbe4101ec682aa034c7cebc59cfaea9ea9076ede7f4af152e8b2fa9cb6',
          'af45d2e376484031617f78d2b58a6b1b9c7ef464f5a01b47e42ec3736322445e8e2240ca5e69e2c78b3239ecfab21649',
          '4ece084485813e9088d2c63a041bc5b44f9ef1012a2b588f3cd11f05033ac4c60c2ef6ab4030fe8296248df163f44952',
        ),
        'SHA-512': v(
          '87aa7cdea5ef619d4ff0b4241a1d6cb02379f4e2ce4ec2787ad0b30545e17cdedaa833b7d6b8a702038b274eaea3f4e4be9d914eeb61f1702e696c203a126854',
          '164b7a7bfcf819e2e395fbe73b56e0a387bd64222e831fd610270cd7ea2505549758bf75c05a994a6d034f65f8f0e6fdcaeab1a34d4a6b4b636e070a38bce737',
          '80b24263c7c1a3ebb71493c1dd7be8b49b46d1f41b4aeec1121b013783f8f3526b56d037e05f2598bd0fd2215d6a1e5295e64f73f63f0aec8b915a985d786598',
        ),
        sha1: 'effcdf6ae5eb2fa2d27416d5f184df9c259a7c79',
      });
    });
  });
});
