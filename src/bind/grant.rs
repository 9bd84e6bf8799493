//! `update-policy` grants a zone hands to other tools' keys (cert-manager,
//! external-dns, ACME clients): which names a key may change, and which
//! record types. Pure, no I/O.
//!
//! A [`Grant`] is built only from validated parts ([`KeyName`],
//! [`DomainName`] checked to lie inside the zone, [`RecordType`]) and
//! written as tokens by the named.conf writer, so nothing a user typed is
//! pasted into the clause. The operator's own keys keep `zonesub ANY` (see
//! [`super::zone::PrimaryZone`]); these grants come after them and can only
//! add rights for other keys (BIND applies the first rule that matches the
//! signer, name and type, and every rule here is a `grant`).
//!
//! Must never: render a name outside its zone, a wildcard rule whose name
//! has no leading `*` label, or a name for `zonesub` (BIND's grammar has
//! none there).

use super::conf::Tok;
use super::error::ValidationError;
use super::name::{DomainName, ZoneName};
use super::rdata::RecordType;
use super::types::KeyName;

/// Which names a grant covers (BIND's rule types that take a TSIG key as
/// the identity and a name in the zone).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GrantMatch {
    /// Exactly this name (`name`).
    Name(DomainName),
    /// This name and every name below it (`subdomain`).
    Subdomain(DomainName),
    /// Names the wildcard name matches, e.g. `*.dyn.example.com.` covers
    /// every name below `dyn.example.com.` (`wildcard`).
    Wildcard(DomainName),
    /// Every name in the zone (`zonesub`).
    Zonesub,
}

impl GrantMatch {
    /// The rule type as named.conf spells it.
    pub fn rule(&self) -> &'static str {
        match self {
            GrantMatch::Name(_) => "name",
            GrantMatch::Subdomain(_) => "subdomain",
            GrantMatch::Wildcard(_) => "wildcard",
            GrantMatch::Zonesub => "zonesub",
        }
    }

    /// The name the rule carries (`None` for `zonesub`).
    pub fn name(&self) -> Option<&DomainName> {
        match self {
            GrantMatch::Name(n) | GrantMatch::Subdomain(n) | GrantMatch::Wildcard(n) => Some(n),
            GrantMatch::Zonesub => None,
        }
    }
}

/// One `grant KEY RULE [NAME] TYPES;` of a zone's update policy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Grant {
    key: KeyName,
    rule: GrantMatch,
    /// Empty: `ANY` (every type BIND lets an update change).
    types: Vec<RecordType>,
}

impl Grant {
    /// A grant for `key` in `zone`. Fails when the rule's name lies outside
    /// the zone, or a wildcard rule's name does not start with `*`.
    pub fn new(
        zone: &ZoneName,
        key: KeyName,
        rule: GrantMatch,
        types: Vec<RecordType>,
    ) -> Result<Self, ValidationError> {
        if let Some(n) = rule.name()
            && !n.is_within(zone.as_domain())
        {
            return Err(ValidationError::new(
                "grant name",
                &n.fqdn(),
                &format!("is outside zone {zone}"),
            ));
        }
        if let GrantMatch::Wildcard(n) = &rule
            && !n.is_wildcard()
        {
            return Err(ValidationError::new(
                "grant name",
                &n.fqdn(),
                "must start with a '*' label for match wildcard",
            ));
        }
        let mut types = types;
        types.sort_by_key(|t| t.as_str());
        types.dedup();
        Ok(Grant { key, rule, types })
    }

    /// The key the grant is for.
    pub fn key(&self) -> &KeyName {
        &self.key
    }

    /// Which names it covers.
    pub fn rule(&self) -> &GrantMatch {
        &self.rule
    }

    /// The record types it allows (empty: any).
    pub fn types(&self) -> &[RecordType] {
        &self.types
    }

    /// Tokens of the rule, borrowing `name` (the rule's FQDN, see
    /// [`Grant::name_text`]) for the quoted name.
    pub fn tokens<'a>(&'a self, name: Option<&'a str>) -> Vec<Tok<'a>> {
        let mut t = vec![
            Tok::Kw("grant"),
            Tok::Str(self.key.as_str()),
            Tok::Kw(self.rule.rule()),
        ];
        if let Some(n) = name {
            t.push(Tok::Str(n));
        }
        if self.types.is_empty() {
            t.push(Tok::Kw("ANY"));
        } else {
            t.extend(self.types.iter().map(|r| Tok::Kw(r.as_str())));
        }
        t
    }

    /// The rule's name as the clause writes it (absolute, trailing dot).
    pub fn name_text(&self) -> Option<String> {
        self.rule.name().map(DomainName::fqdn)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bind::conf::ConfWriter;

    fn zone() -> ZoneName {
        ZoneName::parse("example.com").unwrap()
    }

    fn name(s: &str) -> DomainName {
        DomainName::resolve_target(s, &zone()).unwrap()
    }

    fn text(g: &Grant) -> String {
        let n = g.name_text();
        let mut w = ConfWriter::new();
        w.inline_list(&[Tok::Kw("update-policy")], &[g.tokens(n.as_deref())]);
        w.finish()
    }

    #[test]
    fn rules_render_as_bind_spells_them() {
        let k = KeyName::parse("acme").unwrap();
        let g = Grant::new(
            &zone(),
            k.clone(),
            GrantMatch::Name(name("_acme-challenge.www")),
            vec![RecordType::Txt, RecordType::Txt],
        )
        .unwrap();
        assert_eq!(
            text(&g),
            "update-policy { grant \"acme\" name \"_acme-challenge.www.example.com.\" TXT; };\n"
        );
        let g = Grant::new(
            &zone(),
            k.clone(),
            GrantMatch::Wildcard(name("*.dyn")),
            vec![RecordType::Txt, RecordType::A],
        )
        .unwrap();
        assert_eq!(
            text(&g),
            "update-policy { grant \"acme\" wildcard \"*.dyn.example.com.\" A TXT; };\n"
        );
        let g = Grant::new(&zone(), k.clone(), GrantMatch::Zonesub, vec![]).unwrap();
        assert_eq!(text(&g), "update-policy { grant \"acme\" zonesub ANY; };\n");
        let g = Grant::new(&zone(), k, GrantMatch::Subdomain(name("@")), vec![]).unwrap();
        assert_eq!(
            text(&g),
            "update-policy { grant \"acme\" subdomain \"example.com.\" ANY; };\n"
        );
    }

    #[test]
    fn names_outside_the_zone_and_bare_wildcards_are_refused() {
        let k = KeyName::parse("acme").unwrap();
        let outside = DomainName::parse_absolute("www.example.org.").unwrap();
        let e = Grant::new(&zone(), k.clone(), GrantMatch::Name(outside), vec![]).unwrap_err();
        assert!(e.to_string().contains("outside zone"), "{e}");
        // A parent of the zone is outside it too.
        let parent = DomainName::parse_absolute("com.").unwrap();
        assert!(Grant::new(&zone(), k.clone(), GrantMatch::Subdomain(parent), vec![]).is_err());
        let e = Grant::new(&zone(), k, GrantMatch::Wildcard(name("dyn")), vec![]).unwrap_err();
        assert!(e.to_string().contains("'*'"), "{e}");
    }
}
