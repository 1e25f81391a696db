import { Option } from "effect"
import * as sf from "../../core/structuredFields.js"

export const parseSfString = (value: string): Option.Option<string> => Option.fromNullable(sf.parseSfString(value))

export const formatSfString = (value: string): Option.Option<string> =>
  Option.fromNullable(typeof value === "string" ? sf.serializeString(value) : undefined)

export const parseIdempotencyKey = (
  value: string,
  options?: { readonly maxLength?: number | undefined }
): Option.Option<string> => Option.fromNullable(sf.parseIdempotencyKey(value, options?.maxLength ?? 255))
