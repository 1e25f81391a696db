/**
 * HTTP Structured Field Lists and Items (RFC 9651, which obsoletes RFC 8941): a strict parser following the
 * parsing algorithms of its section 4.2 step by step, and the serialising algorithms of section 4.1. Every
 * function returns `undefined` on malformed input instead of throwing, so header handling stays total.
 *
 * Serialising Items and Lists in general is in `structuredFieldsSerialize.ts`. Plain TypeScript with no
 * dependency: the Effect modules (`StructuredFields`, `RateLimitHeaders`,
 * `RetryAfter`, the idempotency middleware) wrap these results in `Option`.
 */

export type BareItem =
  | { readonly type: "integer"; readonly value: number }
  | { readonly type: "decimal"; readonly value: number }
  | { readonly type: "string"; readonly value: string }
  | { readonly type: "token"; readonly value: string }
  | { readonly type: "byteSequence"; readonly value: string } // base64 text, not decoded
  | { readonly type: "boolean"; readonly value: boolean }
  | { readonly type: "date"; readonly value: number }
  | { readonly type: "displayString"; readonly value: string }

/** Ordered map of parameters; a repeated key overwrites the value and keeps its first position. */
export type Parameters = ReadonlyMap<string, BareItem>

export interface Item {
  readonly _tag: "Item"
  readonly value: BareItem
  readonly params: Parameters
}

export interface InnerList {
  readonly _tag: "InnerList"
  readonly items: ReadonlyArray<Item>
  readonly params: Parameters
}

export type ListMember = Item | InnerList

export const isDigit = (c: string | undefined): boolean => c !== undefined && c >= "0" && c <= "9"
export const isAlpha = (c: string | undefined): boolean =>
  c !== undefined && ((c >= "a" && c <= "z") || (c >= "A" && c <= "Z"))
export const isLcAlpha = (c: string | undefined): boolean => c !== undefined && c >= "a" && c <= "z"

/** RFC 9110 `tchar`. */
export const isTchar = (c: string | undefined): boolean =>
  c !== undefined && (isAlpha(c) || isDigit(c) || "!#$%&'*+-.^_`|~".includes(c))

/** Removes leading and trailing spaces and tabs (HTTP's OWS), in linear time. */
export const trimOws = (value: string): string => {
  let start = 0
  let end = value.length
  while (start < end && (value[start] === " " || value[start] === "\t")) start++
  while (end > start && (value[end - 1] === " " || value[end - 1] === "\t")) end--
  return value.slice(start, end)
}

/** Printable ASCII: the only characters an sf-string may hold. */
export const isPrintableAscii = (c: string): boolean => c >= " " && c <= "~"

const MAX_INTEGER = 999_999_999_999_999

/** Largest integer a Structured Field can carry (15 digits). */
export const maxInteger = MAX_INTEGER

class Cursor {
  pos = 0
  constructor(readonly input: string) {}
  get done(): boolean {
    return this.pos >= this.input.length
  }
  peek(): string | undefined {
    return this.input[this.pos]
  }
  next(): string | undefined {
    return this.input[this.pos++]
  }
  skipSp(): void {
    while (this.input[this.pos] === " ") this.pos++
  }
  skipOws(): void {
    while (this.input[this.pos] === " " || this.input[this.pos] === "\t") this.pos++
  }
}

const parseNumber = (c: Cursor): BareItem | undefined => {
  let sign = 1
  if (c.peek() === "-") {
    c.next()
    sign = -1
  }
  if (!isDigit(c.peek())) return undefined
  let text = ""
  let isDecimal = false
  while (!c.done) {
    const ch = c.peek()!
    if (isDigit(ch)) {
      text += ch
      c.next()
    } else if (!isDecimal && ch === ".") {
      if (text.length > 12) return undefined
      text += ch
      isDecimal = true
      c.next()
    } else {
      break
    }
    if (!isDecimal && text.length > 15) return undefined
    if (isDecimal && text.length > 16) return undefined
  }
  // `|| 0` turns "-0" into 0
  const value = sign * Number(text) || 0
  if (!isDecimal) return { type: "integer", value }
  if (text.endsWith(".")) return undefined
  if (text.length - text.indexOf(".") - 1 > 3) return undefined
  return { type: "decimal", value }
}

const parseString = (c: Cursor): BareItem | undefined => {
  if (c.next() !== "\"") return undefined
  let out = ""
  while (!c.done) {
    const ch = c.next()!
    if (ch === "\\") {
      const escaped = c.next()
      if (escaped !== "\"" && escaped !== "\\") return undefined
      out += escaped
    } else if (ch === "\"") {
      return { type: "string", value: out }
    } else if (!isPrintableAscii(ch)) {
      return undefined
    } else {
      out += ch
    }
  }
  return undefined
}

const parseToken = (c: Cursor): BareItem | undefined => {
  const first = c.peek()
  if (!(isAlpha(first) || first === "*")) return undefined
  let out = c.next()!
  while (!c.done) {
    const ch = c.peek()!
    if (!(isTchar(ch) || ch === ":" || ch === "/")) break
    out += ch
    c.next()
  }
  return { type: "token", value: out }
}

export const isBase64 = (ch: string): boolean => isAlpha(ch) || isDigit(ch) || ch === "+" || ch === "/" || ch === "="

const parseByteSequence = (c: Cursor): BareItem | undefined => {
  if (c.next() !== ":") return undefined
  let out = ""
  while (!c.done) {
    const ch = c.next()!
    if (ch === ":") return { type: "byteSequence", value: out }
    if (!isBase64(ch)) return undefined
    out += ch
  }
  return undefined
}

const parseBoolean = (c: Cursor): BareItem | undefined => {
  if (c.next() !== "?") return undefined
  const ch = c.next()
  if (ch === "1") return { type: "boolean", value: true }
  if (ch === "0") return { type: "boolean", value: false }
  return undefined
}

const parseDate = (c: Cursor): BareItem | undefined => {
  if (c.next() !== "@") return undefined
  const n = parseNumber(c)
  return n?.type === "integer" ? { type: "date", value: n.value } : undefined
}

const isLcHex = (c: string | undefined): boolean => isDigit(c) || (c !== undefined && c >= "a" && c <= "f")
const utf8 = new TextDecoder("utf-8", { fatal: true })

const parseDisplayString = (c: Cursor): BareItem | undefined => {
  if (c.next() !== "%" || c.next() !== "\"") return undefined
  const bytes: Array<number> = []
  while (!c.done) {
    const ch = c.next()!
    if (!isPrintableAscii(ch)) return undefined
    if (ch === "%") {
      const hi = c.next()
      const lo = c.next()
      if (!isLcHex(hi) || !isLcHex(lo)) return undefined
      bytes.push(parseInt(hi! + lo!, 16))
    } else if (ch === "\"") {
      try {
        return { type: "displayString", value: utf8.decode(new Uint8Array(bytes)) }
      } catch {
        return undefined
      }
    } else {
      bytes.push(ch.charCodeAt(0))
    }
  }
  return undefined
}

const parseBareItem = (c: Cursor): BareItem | undefined => {
  const ch = c.peek()
  if (ch === "-" || isDigit(ch)) return parseNumber(c)
  if (ch === "\"") return parseString(c)
  if (isAlpha(ch) || ch === "*") return parseToken(c)
  if (ch === ":") return parseByteSequence(c)
  if (ch === "?") return parseBoolean(c)
  if (ch === "@") return parseDate(c)
  if (ch === "%") return parseDisplayString(c)
  return undefined
}

const parseKey = (c: Cursor): string | undefined => {
  const first = c.peek()
  if (!(isLcAlpha(first) || first === "*")) return undefined
  let out = c.next()!
  while (!c.done) {
    const ch = c.peek()!
    if (!(isLcAlpha(ch) || isDigit(ch) || "_-.*".includes(ch))) break
    out += ch
    c.next()
  }
  return out
}

const parseParameters = (c: Cursor): Parameters | undefined => {
  const params = new Map<string, BareItem>()
  while (c.peek() === ";") {
    c.next()
    c.skipSp()
    const key = parseKey(c)
    if (key === undefined) return undefined
    let value: BareItem | undefined = { type: "boolean", value: true }
    if (c.peek() === "=") {
      c.next()
      value = parseBareItem(c)
      if (value === undefined) return undefined
    }
    params.set(key, value)
  }
  return params
}

const parseItemAt = (c: Cursor): Item | undefined => {
  const value = parseBareItem(c)
  if (value === undefined) return undefined
  const params = parseParameters(c)
  return params === undefined ? undefined : { _tag: "Item", value, params }
}

const parseInnerList = (c: Cursor): InnerList | undefined => {
  if (c.next() !== "(") return undefined
  const items: Array<Item> = []
  while (!c.done) {
    c.skipSp()
    if (c.peek() === ")") {
      c.next()
      const params = parseParameters(c)
      return params === undefined ? undefined : { _tag: "InnerList", items, params }
    }
    const item = parseItemAt(c)
    if (item === undefined) return undefined
    items.push(item)
    const ch = c.peek()
    if (ch !== " " && ch !== ")") return undefined
  }
  return undefined
}

/** Parses a whole List field value; `undefined` when malformed. An empty value is an empty List. */
export const parseList = (input: string): ReadonlyArray<ListMember> | undefined => {
  if (typeof input !== "string") return undefined
  const c = new Cursor(input)
  c.skipSp()
  const members: Array<ListMember> = []
  while (!c.done) {
    const member = c.peek() === "(" ? parseInnerList(c) : parseItemAt(c)
    if (member === undefined) return undefined
    members.push(member)
    c.skipOws()
    if (c.done) return members
    if (c.next() !== ",") return undefined
    c.skipOws()
    if (c.done) return undefined // trailing comma
  }
  return members
}

/** Parses a whole Item field value; `undefined` when malformed. */
export const parseItem = (input: string): Item | undefined => {
  if (typeof input !== "string") return undefined
  const c = new Cursor(input)
  c.skipSp()
  const item = parseItemAt(c)
  if (item === undefined) return undefined
  c.skipSp()
  return c.done ? item : undefined
}

/** Serialises an sf-string; `undefined` when a character is outside printable ASCII. */
export const serializeString = (value: string): string | undefined => {
  let out = "\""
  for (const ch of value) {
    if (!isPrintableAscii(ch)) return undefined
    out += ch === "\"" || ch === "\\" ? `\\${ch}` : ch
  }
  return out + "\""
}

/** Clamps any number to a non-negative Structured Field Integer (NaN gives 0), rounding with `round`. */
export const clampInteger = (n: number, round: (n: number) => number): number =>
  Number.isNaN(n) ? 0 : Math.min(MAX_INTEGER, Math.max(0, round(n)))

/** A field value that is exactly one sf-string without parameters, unescaped; `undefined` otherwise. */
export const parseSfString = (value: string): string | undefined => {
  const item = parseItem(value)
  return item !== undefined && item.value.type === "string" && item.params.size === 0 ? item.value.value : undefined
}

const isBareKeyChar = (c: string): boolean => isTchar(c) || c === ":" || c === "/"

/**
 * An `Idempotency-Key` value: an sf-string (the IETF draft) or a bare token (what most clients send: token
 * characters plus `:` and `/`, possibly starting with a digit), non-empty and at most `maxLength` characters
 * after unescaping; `undefined` for anything else.
 */
export const parseIdempotencyKey = (value: string, maxLength: number): string | undefined => {
  if (typeof value !== "string") return undefined
  const trimmed = trimOws(value)
  let key: string
  if (trimmed.startsWith("\"")) {
    const parsed = parseSfString(trimmed)
    if (parsed === undefined) return undefined
    key = parsed
  } else {
    for (const c of trimmed) if (!isBareKeyChar(c)) return undefined
    key = trimmed
  }
  return key.length > 0 && key.length <= maxLength ? key : undefined
}
