// 03_encoding.js: TextEncoder and TextDecoder (the Encoding standard; encoding_rs decodes).
// (A function body: `src/web/mod.rs` wraps it as `(function (lib) { ... })` with `op`,
// `clone`, `load`, `OP` and `SCRIPT` in scope.)
const { TOKEN, illegalConstructor, requiredArguments, toDOMString, toUSVString, toBoolean, toDictionary, bufferSourceBytes, webidlClass, reportException, newDOMException } = load(SCRIPT.webidl);

class TextEncoder {
  get encoding() {
    return 'utf-8';
  }
  encode(input = '') {
    // The op writes UTF-8 with lone surrogates as U+FFFD, which is what a USVString gives;
    // toWellFormed() would first flatten a rope of two-byte text inside V8, past the run's
    // memory, where the op charges its length before it reads a character.
    return op(OP.encode, toDOMString(input));
  }
  encodeInto(source, destination) {
    requiredArguments(arguments.length, 2, "Failed to execute 'encodeInto' on 'TextEncoder'");
    source = toUSVString(source);
    if (!(destination instanceof Uint8Array)) {
      throw new TypeError("Failed to execute 'encodeInto' on 'TextEncoder': parameter 2 is not of type 'Uint8Array'.");
    }
    const [read, written] = op(OP.encodeInto, source, destination);
    return { read, written };
  }
}

class TextDecoder {
  #encoding;
  #fatal;
  #ignoreBOM;
  // Bytes a streaming decode left for the next chunk, and whether the stream's start
  // (where a byte order mark is dropped) is behind.
  #pending = null;
  #started = false;
  constructor(label = 'utf-8', options = undefined) {
    options = toDictionary(options, "Failed to construct 'TextDecoder'");
    this.#encoding = op(OP.encodingLookup, toDOMString(label));
    this.#fatal = toBoolean(options.fatal);
    this.#ignoreBOM = toBoolean(options.ignoreBOM);
  }
  get encoding() {
    return this.#encoding;
  }
  get fatal() {
    return this.#fatal;
  }
  get ignoreBOM() {
    return this.#ignoreBOM;
  }
  decode(input = undefined, options = undefined) {
    options = toDictionary(options, "Failed to execute 'decode' on 'TextDecoder'");
    let bytes = input === undefined ? new Uint8Array(0) : bufferSourceBytes(input, "Failed to execute 'decode' on 'TextDecoder'");
    const stream = toBoolean(options.stream);
    if (this.#pending !== null) {
      const joined = new Uint8Array(this.#pending.length + bytes.length);
      joined.set(this.#pending, 0);
      joined.set(bytes, this.#pending.length);
      bytes = joined;
      this.#pending = null;
    }
    let text, tail;
    try {
      [text, tail] = op(OP.decode, this.#encoding, bytes, this.#fatal, stream, !this.#ignoreBOM && !this.#started);
    } catch (e) {
      this.#started = false;
      throw e;
    }
    if (stream) {
      if (tail > 0) this.#pending = bytes.slice(bytes.length - tail);
      if (bytes.length > tail) this.#started = true;
    } else {
      this.#started = false;
    }
    return text;
  }
}
return { TextEncoder: webidlClass(TextEncoder), TextDecoder: webidlClass(TextDecoder) };
