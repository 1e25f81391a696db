/**
 * Serialising HTTP Structured Field Items and Lists (RFC 9651 §4.1): the inverse of the parser in
 * `structuredFields.ts`, so `parseList(serializeList(x))` gives `x` back for anything the wire can carry.
 * Every function returns `undefined` for a value the wire cannot carry instead of throwing.
 */
import {
  type BareItem,
  type InnerList,
  isAlpha,
  isBase64,
  isDigit,
  isLcAlpha,
  isTchar,
  type Item,
  type ListMember,
  maxInteger,
  type Parameters,
  serializeString
} from "./structuredFields.js"

const isToken = (value: string): boolean => {
  if (value.length === 0 || !(isAlpha(value[0]) || value[0] === "*")) return false
  for (let i = 1; i < value.length; i++) {
    const ch = value[i]
    if (!(isTchar(ch) || ch === ":" || ch === "/")) return false
  }
  return true
}

const isKey = (value: string): boolean => {
  if (value.length === 0 || !(isLcAlpha(value[0]) || value[0] === "*")) return false
  for (let i = 1; i < value.length; i++) {
    const ch = value[i]!
    if (!(isLcAlpha(ch) || isDigit(ch) || "_-.*".includes(ch))) return false
  }
  return true
}

const serializeInteger = (n: number): string | undefined =>
  Number.isInteger(n) && Math.abs(n) <= maxInteger ? String(n || 0) : undefined

/** At most 12 integer digits and 3 fractional ones, rounded; at least one fractional digit is written. */
const serializeDecimal = (n: number): string | undefined => {
  if (!Number.isFinite(n) || Math.abs(n) >= 1e12) return undefined
  const fixed = n.toFixed(3)
  if (fixed.replace(/^-/, "").indexOf(".") > 12) return undefined
  const trimmed = fixed.replace(/0{1,2}$/, "")
  return trimmed === "-0.0" ? "0.0" : trimmed
}

const hex = "0123456789abcdef"
const utf8Encoder = new TextEncoder()

const serializeDisplayString = (value: string): string | undefined => {
  if (!isWellFormed(value)) return undefined
  let out = "%\""
  for (const byte of utf8Encoder.encode(value)) {
    out += byte === 0x25 || byte === 0x22 || byte < 0x20 || byte > 0x7e
      ? `%${hex[byte >> 4]}${hex[byte & 15]}`
      : String.fromCharCode(byte)
  }
  return out + "\""
}

/** No lone surrogates: they have no UTF-8 form, and encoding them would not read back. */
const isWellFormed = (value: string): boolean => {
  for (let i = 0; i < value.length; i++) {
    const code = value.charCodeAt(i)
    if (code >= 0xd800 && code <= 0xdbff) {
      const next = value.charCodeAt(i + 1)
      if (!(next >= 0xdc00 && next <= 0xdfff)) return false
      i++
    } else if (code >= 0xdc00 && code <= 0xdfff) {
      return false
    }
  }
  return true
}

const isBase64Text = (value: string): boolean => {
  for (const ch of value) if (!isBase64(ch)) return false
  return true
}

/** Serialises a Bare Item; `undefined` when its value cannot be carried (out of range, bad characters). */
export const serializeBareItem = (item: BareItem): string | undefined => {
  switch (item.type) {
    case "integer":
      return serializeInteger(item.value)
    case "decimal":
      return serializeDecimal(item.value)
    case "string":
      return serializeString(item.value)
    case "token":
      return isToken(item.value) ? item.value : undefined
    case "byteSequence":
      return isBase64Text(item.value) ? `:${item.value}:` : undefined
    case "boolean":
      return item.value ? "?1" : "?0"
    case "date": {
      const n = serializeInteger(item.value)
      return n === undefined ? undefined : `@${n}`
    }
    case "displayString":
      return serializeDisplayString(item.value)
  }
}

/** Serialises Parameters: `;key` for a true boolean, `;key=value` otherwise. */
export const serializeParameters = (params: Parameters): string | undefined => {
  let out = ""
  for (const [key, value] of params) {
    if (!isKey(key)) return undefined
    out += `;${key}`
    if (value.type === "boolean" && value.value) continue
    const bare = serializeBareItem(value)
    if (bare === undefined) return undefined
    out += `=${bare}`
  }
  return out
}

/** Serialises an Item field value (or a List member that is an Item). */
export const serializeItem = (item: Item): string | undefined => {
  const value = serializeBareItem(item.value)
  const params = serializeParameters(item.params)
  return value === undefined || params === undefined ? undefined : value + params
}

const serializeInnerList = (list: InnerList): string | undefined => {
  const items: Array<string> = []
  for (const item of list.items) {
    const text = serializeItem(item)
    if (text === undefined) return undefined
    items.push(text)
  }
  const params = serializeParameters(list.params)
  return params === undefined ? undefined : `(${items.join(" ")})${params}`
}

/** Serialises a List field value; an empty List is `""` (send no header). */
export const serializeList = (members: ReadonlyArray<ListMember>): string | undefined => {
  const out: Array<string> = []
  for (const member of members) {
    const text = member._tag === "Item" ? serializeItem(member) : serializeInnerList(member)
    if (text === undefined) return undefined
    out.push(text)
  }
  return out.join(", ")
}
