//! `#[derive(Kiln)]` for structs with named fields.
//!
//! `Kiln` implements [`KilnType`], [`Decode`] and [`Encode`] from
//! `kiln_nostd::frozen`; `#[derive(KilnType, Encode)]` (or `Decode`) picks
//! single parts, e.g. for an encode-only struct holding `TensorSpecs`. The type
//! part adds two inherent constants:
//!
//! * `TYPE_TEXT: &'static str`: the canonical type text, built at compile
//!   time from the field types (`struct{id:i64,name:str,}`);
//! * `SCHEMA_HASH: u64`: its FNV-1a 64 schema hash, from a `const fn`.
//!
//! Fields are written in declaration order. A struct may borrow from the
//! buffer through one lifetime parameter (`&'a str`, `ListView<'a, f32>`,
//! `DictView<'a, V>`, `Directory<'a>` ...); type and const parameters are
//! not supported.
//!
//! ```ignore
//! use kiln_nostd::frozen::{Kiln, ListView};
//!
//! #[derive(Kiln)]
//! struct Record<'a> {
//!     id: i64,
//!     name: &'a str,
//!     scores: ListView<'a, f32>,
//! }
//! assert_eq!(Record::TYPE_TEXT, "struct{id:i64,name:str,scores:list<f32>,}");
//! ```
//!
//! [`KilnType`]: https://docs.rs/kiln-nostd
//! [`Decode`]: https://docs.rs/kiln-nostd
//! [`Encode`]: https://docs.rs/kiln-nostd

// A published crate: every public item is documented (the workspace only warns).
#![deny(missing_docs)]

use proc_macro::TokenStream;
use proc_macro2::{Span, TokenStream as Tokens};
use quote::quote;
use syn::{parse_macro_input, Data, DeriveInput, Error, Fields, GenericParam, Lifetime};

/// Derives `KilnType` (with `TYPE_TEXT` and `SCHEMA_HASH`), `Decode` and `Encode`.
#[proc_macro_derive(Kiln)]
pub fn derive_kiln(input: TokenStream) -> TokenStream {
    run(input, &[Part::Type, Part::Decode, Part::Encode])
}

/// Derives only `KilnType` (with `TYPE_TEXT` and `SCHEMA_HASH`); combine
/// with `Decode` and/or `Encode` for a one-way type.
#[proc_macro_derive(KilnType)]
pub fn derive_kiln_type(input: TokenStream) -> TokenStream {
    run(input, &[Part::Type])
}

/// Derives `Decode` (needs `KilnType`, derived or written).
#[proc_macro_derive(Decode)]
pub fn derive_decode(input: TokenStream) -> TokenStream {
    run(input, &[Part::Decode])
}

/// Derives `Encode` (needs `KilnType`, derived or written).
#[proc_macro_derive(Encode)]
pub fn derive_encode(input: TokenStream) -> TokenStream {
    run(input, &[Part::Encode])
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Part {
    Type,
    Decode,
    Encode,
}

fn run(input: TokenStream, parts: &[Part]) -> TokenStream {
    let input = parse_macro_input!(input as DeriveInput);
    let mut out = Tokens::new();
    for part in parts {
        match expand(&input, *part) {
            Ok(t) => out.extend(t),
            Err(e) => return e.into_compile_error().into(),
        }
    }
    out.into()
}

fn expand(input: &DeriveInput, part: Part) -> syn::Result<Tokens> {
    let name = &input.ident;
    let fields = named_fields(input)?;
    let lifetime = single_lifetime(input)?;
    let k = quote!(::kiln_nostd::frozen);

    let idents: Vec<_> = fields.iter().map(|f| f.ident.clone()).collect::<Option<_>>().unwrap_or_default();
    let types: Vec<_> = fields.iter().map(|f| &f.ty).collect();
    let names: Vec<String> = idents.iter().map(|i| i.to_string().trim_start_matches("r#").to_owned()).collect();

    let (impl_generics, ty_generics, where_clause) = input.generics.split_for_impl();
    let static_ty = match &lifetime {
        Some(_) => quote!(#name<'static>),
        None => quote!(#name),
    };
    let de = lifetime.clone().unwrap_or_else(|| Lifetime::new("'__kiln_de", Span::call_site()));
    let decode_impl = match &lifetime {
        Some(_) => quote!(impl #impl_generics #k::Decode<#de> for #name #ty_generics #where_clause),
        None => quote!(impl<#de> #k::Decode<#de> for #name #where_clause),
    };

    Ok(match part {
        Part::Type => quote! {
            impl #impl_generics #name #ty_generics #where_clause {
                #[doc(hidden)]
                pub const __KILN_FIELDS: &'static [#k::Field] = &[
                    #( #k::Field::new(#names, <#types as #k::KilnType>::TY), )*
                ];

                /// The canonical Frozen type text of this struct.
                pub const TYPE_TEXT: &'static str = {
                    const TY: &#k::Ty = <#static_ty as #k::KilnType>::TY;
                    const LEN: usize = TY.text_len();
                    const BYTES: &[u8] = &TY.text_bytes::<LEN>();
                    match ::core::str::from_utf8(BYTES) {
                        ::core::result::Result::Ok(s) => s,
                        ::core::result::Result::Err(_) => "",
                    }
                };

                /// The FNV-1a 64 schema hash of `TYPE_TEXT`.
                pub const SCHEMA_HASH: u64 = <#static_ty as #k::KilnType>::TY.schema_hash();
            }

            impl #impl_generics #k::KilnType for #name #ty_generics #where_clause {
                const TY: &'static #k::Ty = &#k::Ty::structure(Self::__KILN_FIELDS);
            }
        },
        Part::Decode => quote! {
            #decode_impl {
                #[inline]
                fn decode(d: &mut #k::Decoder<#de>) -> ::kiln_nostd::error::Result<Self> {
                    ::core::result::Result::Ok(Self {
                        #( #idents: <#types as #k::Decode<#de>>::decode(d)?, )*
                    })
                }
            }
        },
        Part::Encode => quote! {
            impl #impl_generics #k::Encode for #name #ty_generics #where_clause {
                #[inline]
                fn encoded_len(&self) -> usize {
                    0usize #( .saturating_add(#k::Encode::encoded_len(&self.#idents)) )*
                }

                #[inline]
                fn encode(&self, e: &mut #k::Encoder<'_>) -> ::kiln_nostd::error::Result<()> {
                    #( #k::Encode::encode(&self.#idents, e)?; )*
                    ::core::result::Result::Ok(())
                }
            }
        },
    })
}

fn named_fields(input: &DeriveInput) -> syn::Result<Vec<syn::Field>> {
    match &input.data {
        Data::Struct(s) => match &s.fields {
            Fields::Named(named) => Ok(named.named.iter().cloned().collect()),
            Fields::Unit => Ok(Vec::new()),
            Fields::Unnamed(_) => {
                Err(Error::new_spanned(&input.ident, "Kiln structs need named fields (the type text names each field)"))
            }
        },
        _ => Err(Error::new_spanned(&input.ident, "#[derive(Kiln)] supports structs only")),
    }
}

/// The struct's lifetime parameter, if any; type and const parameters, or a
/// second lifetime, are rejected.
fn single_lifetime(input: &DeriveInput) -> syn::Result<Option<Lifetime>> {
    let mut found = None;
    for p in &input.generics.params {
        match p {
            GenericParam::Lifetime(l) if found.is_none() => found = Some(l.lifetime.clone()),
            other => {
                return Err(Error::new_spanned(
                    other,
                    "#[derive(Kiln)] supports at most one lifetime parameter and no type or const parameters",
                ))
            }
        }
    }
    Ok(found)
}
