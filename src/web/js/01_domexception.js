// 01_domexception.js: DOMException (WebIDL), the error class of the web APIs.
// (A function body: `src/web/mod.rs` wraps it as `(function (lib) { ... })` with `op`,
// `clone`, `load`, `OP` and `SCRIPT` in scope.)
const { TOKEN, illegalConstructor, requiredArguments, toDOMString, toUSVString, toBoolean, toDictionary, bufferSourceBytes, webidlClass, reportException, newDOMException } = load(SCRIPT.webidl);

const names = [
  'IndexSizeError', 'DOMStringSizeError', 'HierarchyRequestError', 'WrongDocumentError',
  'InvalidCharacterError', 'NoDataAllowedError', 'NoModificationAllowedError', 'NotFoundError',
  'NotSupportedError', 'InUseAttributeError', 'InvalidStateError', 'SyntaxError',
  'InvalidModificationError', 'NamespaceError', 'InvalidAccessError', 'ValidationError',
  'TypeMismatchError', 'SecurityError', 'NetworkError', 'AbortError', 'URLMismatchError',
  'QuotaExceededError', 'TimeoutError', 'InvalidNodeTypeError', 'DataCloneError',
];
const constants = [
  'INDEX_SIZE_ERR', 'DOMSTRING_SIZE_ERR', 'HIERARCHY_REQUEST_ERR', 'WRONG_DOCUMENT_ERR',
  'INVALID_CHARACTER_ERR', 'NO_DATA_ALLOWED_ERR', 'NO_MODIFICATION_ALLOWED_ERR', 'NOT_FOUND_ERR',
  'NOT_SUPPORTED_ERR', 'INUSE_ATTRIBUTE_ERR', 'INVALID_STATE_ERR', 'SYNTAX_ERR',
  'INVALID_MODIFICATION_ERR', 'NAMESPACE_ERR', 'INVALID_ACCESS_ERR', 'VALIDATION_ERR',
  'TYPE_MISMATCH_ERR', 'SECURITY_ERR', 'NETWORK_ERR', 'ABORT_ERR', 'URL_MISMATCH_ERR',
  'QUOTA_EXCEEDED_ERR', 'TIMEOUT_ERR', 'INVALID_NODE_TYPE_ERR', 'DATA_CLONE_ERR',
];
const codes = new Map(names.map((n, i) => [n, i + 1]));
class DOMException {
  #name;
  #message;
  constructor(message = '', options = 'Error') {
    this.#message = toDOMString(message);
    // `new DOMException(message, { name, cause })` (WebIDL's newer form) or a name.
    if (options !== null && typeof options === 'object') {
      this.#name = 'name' in options ? toDOMString(options.name) : 'Error';
      if ('cause' in options) Object.defineProperty(this, 'cause', { value: options.cause, writable: true, configurable: true });
    } else {
      this.#name = toDOMString(options);
    }
    Error.captureStackTrace(this, DOMException);
  }
  get name() {
    return this.#name;
  }
  get message() {
    return this.#message;
  }
  get code() {
    return codes.get(this.#name) ?? 0;
  }
}
Object.setPrototypeOf(DOMException.prototype, Error.prototype);
webidlClass(DOMException);
constants.forEach((constant, i) => {
  const d = { value: i + 1, enumerable: true };
  Object.defineProperty(DOMException, constant, d);
  Object.defineProperty(DOMException.prototype, constant, d);
});
return { DOMException };
