//! What the stand-in wiki answers besides revisions, for the poller and the audit:
//! `list=recentchanges` (edits, creations and log events, `rcdir=newer` from `rcstart`,
//! `rccontinue`, and a retention horizon below which changes are gone, as `$wgRCMaxAge`
//! drops them; a deletion's change names no page, as MediaWiki's do), `list=logevents` of
//! a title (with `logpage`), `meta=siteinfo` (general, namespaces), `generator=allpages` with
//! `prop=info`, `prop=info|revisions&pageids=…`, and the login of a private wiki (a bot
//! password through `meta=tokens` and `action=login`, with a session cookie, or an OAuth 2
//! bearer token; `assert=user` answered `assertuserfailed` once the session is gone,
//! anything else `readapidenied`). Shapes follow the API's documentation (formatversion 2).

use std::collections::{BTreeMap, HashMap};

use serde_json::{Value, json};

use super::api::Wiki;

/// How the stand-in wants its readers logged in.
#[derive(Debug, Clone)]
pub(super) enum Login {
    BotPassword { user: String, password: String },
    Bearer(String),
}

pub(super) const WIKI_ID: &str = "standinwiki";

/// `2026-11-29T03:58:15Z` for seconds since the epoch.
pub(super) fn timestamp(seconds: i64) -> String {
    let days = seconds.div_euclid(86_400);
    let rest = seconds.rem_euclid(86_400);
    // Howard Hinnant's civil_from_days.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        rest / 3_600,
        rest % 3_600 / 60,
        rest % 60
    )
}

/// Seconds since the epoch of `2026-11-29T03:58:15Z`.
pub(super) fn seconds_of(text: &str) -> Option<i64> {
    let (date, time) = text.trim_end_matches('Z').split_once('T')?;
    let mut date = date.split('-').map(|p| p.parse::<i64>().ok());
    let (year, month, day) = (date.next()??, date.next()??, date.next()??);
    let mut time = time.split(':').map(|p| p.parse::<i64>().ok());
    let (hour, minute, second) = (time.next()??, time.next()??, time.next()??);
    let (y, m) = if month <= 2 {
        (year - 1, month + 9)
    } else {
        (year, month - 3)
    };
    let era = y.div_euclid(400);
    let yoe = y.rem_euclid(400);
    let doy = (153 * m + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    Some(days * 86_400 + hour * 3_600 + minute * 60 + second)
}

impl Wiki {
    pub(super) fn now(&self) -> i64 {
        self.clock.unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_secs() as i64)
        })
    }

    /// Records a recent change (its rcid and timestamp added).
    pub(super) fn record(&mut self, mut change: Value) -> u64 {
        self.next_rcid += 1;
        let rcid = self.next_rcid;
        change["rcid"] = json!(rcid);
        change["timestamp"] = json!(timestamp(self.now()));
        self.changes.push(change);
        rcid
    }

    pub(super) fn last_revision(&self, page_id: u64) -> Option<u64> {
        if self.deleted_pages.contains(&page_id) {
            return None;
        }
        self.revisions
            .iter()
            .filter(|(_, (page, _))| *page == page_id)
            .map(|(rev, _)| *rev)
            .max()
    }

    fn namespace(&self, page_id: u64) -> i64 {
        self.namespaces.get(&page_id).copied().unwrap_or(0)
    }

    /// Whether a request may read; the API error when not.
    pub(super) fn refuse(
        &self,
        params: &HashMap<String, String>,
        bearer: Option<&str>,
        cookie: Option<&str>,
    ) -> Option<Value> {
        let login = self.login.as_ref()?;
        let allowed = match login {
            Login::Bearer(token) => bearer == Some(token.as_str()),
            Login::BotPassword { .. } => {
                cookie.is_some_and(|cookie| self.sessions.contains(&session_of(cookie)))
            }
        };
        if allowed {
            return None;
        }
        let (code, info) = if params.get("assert").map(String::as_str) == Some("user") {
            (
                "assertuserfailed",
                "You are no longer logged in, so the action could not be completed.",
            )
        } else if let (Login::Bearer(_), Some(_)) = (login, bearer) {
            (
                "mwoauth-invalid-authorization",
                "The authorization headers in your request are not valid.",
            )
        } else {
            (
                "readapidenied",
                "You need read permission to use this module.",
            )
        };
        Some(json!({"error": {"code": code, "info": info}}))
    }

    /// `meta=tokens&type=login`: a token, and a session cookie to log in under.
    pub(super) fn login_token(&mut self) -> (Value, String) {
        self.next_session += 1;
        let session = format!("pre{}", self.next_session);
        let token = format!("{}+\\", self.next_session);
        self.pending.insert(session.clone(), token.clone());
        (
            json!({"batchcomplete": true, "query": {"tokens": {"logintoken": token}}}),
            session,
        )
    }

    /// `action=login` (a POST form): a session cookie when the bot password and the token
    /// of the cookie's session are right.
    pub(super) fn log_in(
        &mut self,
        form: &HashMap<String, String>,
        cookie: Option<&str>,
    ) -> (Value, Option<String>) {
        self.login_attempts += 1;
        let pending = cookie.map(session_of).and_then(|s| self.pending.remove(&s));
        let field = |key: &str| form.get(key).map_or("", String::as_str);
        if pending.as_deref() != Some(field("lgtoken")) || pending.is_none() {
            return (json!({"login": {"result": "WrongToken"}}), None);
        }
        let right = matches!(&self.login, Some(Login::BotPassword { user, password })
            if user == field("lgname") && password == field("lgpassword"));
        if !right {
            return (
                json!({"login": {"result": "Failed",
                    "reason": "Incorrect username or password entered. Please try again."}}),
                None,
            );
        }
        self.next_session += 1;
        let session = format!("s{}", self.next_session);
        self.sessions.insert(session.clone());
        (
            json!({"login": {"result": "Success", "lguserid": 2, "lgusername": field("lgname")}}),
            Some(session),
        )
    }

    /// `list=recentchanges&rcdir=newer`: from `rcstart` (or the oldest held), after
    /// `rccontinue`, `rclimit` at most; `rcdir=older`: from the newest.
    pub(super) fn recent_changes(&self, params: &HashMap<String, String>) -> Value {
        let newest_first = params.get("rcdir").map(String::as_str) == Some("older");
        if newest_first && (params.contains_key("rcstart") || params.contains_key("rccontinue")) {
            return json!({"error": {"code": "badvalue",
                "info": "the stand-in lists rcdir=older from the newest change only"}});
        }
        let start = params
            .get("rcstart")
            .and_then(|t| seconds_of(t))
            .unwrap_or(i64::MIN);
        let after: Option<(i64, u64)> = params.get("rccontinue").and_then(|c| {
            let (time, rcid) = c.split_once('|')?;
            Some((seconds_of(time)?, rcid.parse().ok()?))
        });
        let limit: usize = params
            .get("rclimit")
            .and_then(|l| l.parse().ok())
            .unwrap_or(10)
            .clamp(1, 500);
        let mut held: Vec<(i64, u64, &Value)> = self
            .changes
            .iter()
            .filter_map(|c| {
                let rcid = c.get("rcid")?.as_u64()?;
                let time = seconds_of(c.get("timestamp")?.as_str()?)?;
                Some((time, rcid, c))
            })
            .filter(|(time, rcid, _)| *rcid >= self.horizon && *time >= start)
            .filter(|(time, rcid, _)| after.is_none_or(|a| (*time, *rcid) >= a))
            .collect();
        held.sort_by_key(|(time, rcid, _)| (*time, *rcid));
        if newest_first {
            held.reverse();
        }
        let more = held.get(limit).map(|(time, rcid, _)| (*time, *rcid));
        let page: Vec<Value> = held
            .into_iter()
            .take(limit)
            .map(|(_, _, c)| c.clone())
            .collect();
        let mut answer = json!({"batchcomplete": true, "query": {"recentchanges": page}});
        if let Some((time, rcid)) = more {
            answer["continue"] =
                json!({"rccontinue": format!("{}|{rcid}", timestamp(time)), "continue": "-||"});
        }
        answer
    }

    /// `list=logevents` of one title (`letitle`), newest first, between `lestart` (the
    /// newest) and `leend`; `leprop=ids` gives `logpage`, the page the action was on.
    pub(super) fn log_events(&self, params: &HashMap<String, String>) -> Value {
        let Some(title) = params.get("letitle") else {
            return json!({"error": {"code": "badvalue",
                "info": "the stand-in lists the log of one title (letitle) only"}});
        };
        let bound = |key: &str| params.get(key).and_then(|t| seconds_of(t));
        let (newest, oldest) = (bound("lestart"), bound("leend"));
        let events: Vec<Value> = self
            .logs
            .iter()
            .rev()
            .filter(|e| e.get("title").and_then(Value::as_str) == Some(title.as_str()))
            .filter(|e| {
                let at = e
                    .get("timestamp")
                    .and_then(Value::as_str)
                    .and_then(seconds_of);
                at.is_some_and(|at| {
                    newest.is_none_or(|n| at <= n) && oldest.is_none_or(|o| at >= o)
                })
            })
            .cloned()
            .collect();
        json!({"batchcomplete": true, "query": {"logevents": events}})
    }

    pub(super) fn siteinfo(&self, params: &HashMap<String, String>) -> Value {
        let mut query = serde_json::Map::new();
        let props = params.get("siprop").map_or("general", String::as_str);
        if props.contains("general") {
            query.insert(
                "general".into(),
                json!({"wikiid": WIKI_ID, "sitename": "Stand-in wiki",
                       "server": "https://wiki.example", "articlepath": "/wiki/$1",
                       "generator": "MediaWiki 1.43.0 (stand-in)"}),
            );
        }
        if props.contains("namespaces") {
            query.insert(
                "namespaces".into(),
                json!({"0": {"id": 0, "name": "", "content": true},
                       "2": {"id": 2, "name": "User"},
                       "4": {"id": 4, "name": "Project"},
                       "100": {"id": 100, "name": "Staff", "content": true}}),
            );
        }
        json!({"batchcomplete": true, "query": query})
    }

    fn page(&self, page_id: u64, info: bool) -> Option<Value> {
        let last = self.last_revision(page_id)?;
        let title = self.titles.get(&page_id)?;
        let mut page = json!({"pageid": page_id, "ns": self.namespace(page_id), "title": title});
        if info {
            page["lastrevid"] = json!(last);
            page["fullurl"] = json!(format!(
                "https://wiki.example/wiki/{}",
                title.replace(' ', "_")
            ));
            if self.redirects.contains(&page_id) {
                page["redirect"] = json!(true);
            }
        }
        Some(page)
    }

    /// `generator=allpages&gapnamespace=N&prop=info`: pages by title, `gapcontinue`.
    pub(super) fn all_pages(&self, params: &HashMap<String, String>) -> Value {
        let namespace: i64 = params
            .get("gapnamespace")
            .and_then(|n| n.parse().ok())
            .unwrap_or(0);
        let limit: usize = params
            .get("gaplimit")
            .and_then(|l| l.parse().ok())
            .unwrap_or(10)
            .clamp(1, 500);
        let from = params.get("gapcontinue").cloned().unwrap_or_default();
        let no_redirects = params.get("gapfilterredir").map(String::as_str) == Some("nonredirects");
        let by_title: BTreeMap<String, u64> = self
            .titles
            .iter()
            .filter(|(page, _)| self.namespace(**page) == namespace)
            .filter(|(page, _)| !(no_redirects && self.redirects.contains(page)))
            .filter(|(page, _)| self.last_revision(**page).is_some())
            .map(|(page, title)| (title.clone(), *page))
            .collect();
        let mut titles = by_title.range(from..);
        let pages: Vec<Value> = titles
            .by_ref()
            .take(limit)
            .filter_map(|(_, page)| self.page(*page, true))
            .collect();
        let mut answer = json!({"batchcomplete": true, "query": {"pages": pages}});
        if let Some((next, _)) = titles.next() {
            answer["continue"] = json!({"gapcontinue": next, "continue": "gapcontinue||"});
        }
        answer
    }

    /// `prop=info|revisions&pageids=…&rvprop=ids|sha1`: each page's current revision.
    pub(super) fn pages_by_id(&self, ids: &str) -> Value {
        let pages: Vec<Value> = ids
            .split('|')
            .filter_map(|id| id.parse::<u64>().ok())
            .map(|id| {
                let Some(mut page) = self.page(id, true) else {
                    return json!({"pageid": id, "missing": true});
                };
                let last = self.last_revision(id).unwrap_or(0);
                page["revisions"] = if self.hidden.contains(&last) {
                    json!([{"revid": last, "sha1hidden": true}])
                } else {
                    json!([{"revid": last, "sha1": "0000000000000000000000000000000000000000"}])
                };
                page
            })
            .collect();
        json!({"batchcomplete": true, "query": {"pages": pages}})
    }
}

/// The session named in a `Cookie` header.
fn session_of(cookie: &str) -> String {
    cookie
        .split(';')
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(name, _)| *name == "standinwiki_session")
        .map(|(_, value)| value.to_owned())
        .unwrap_or_default()
}

/// A form body (`a=1&b=x%20y`), decoded.
pub(super) fn form(body: &str) -> HashMap<String, String> {
    let decode = |text: &str| {
        let bytes = text.replace('+', " ").into_bytes();
        let mut out = Vec::with_capacity(bytes.len());
        let mut i = 0;
        while i < bytes.len() {
            if bytes[i] == b'%'
                && i + 2 < bytes.len()
                && let Ok(byte) =
                    u8::from_str_radix(&String::from_utf8_lossy(&bytes[i + 1..i + 3]), 16)
            {
                out.push(byte);
                i += 3;
            } else {
                out.push(bytes[i]);
                i += 1;
            }
        }
        String::from_utf8_lossy(&out).into_owned()
    };
    body.split('&')
        .filter_map(|pair| pair.split_once('='))
        .map(|(k, v)| (decode(k), decode(v)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_round_trip() {
        for seconds in [0, 951_782_400, 1_764_388_695, 4_102_444_800] {
            assert_eq!(seconds_of(&timestamp(seconds)), Some(seconds));
        }
        assert_eq!(timestamp(1_764_388_695), "2025-11-29T03:58:15Z");
        assert_eq!(
            form("a=1&lgpassword=x%2By+z"),
            HashMap::from([
                ("a".into(), "1".into()),
                ("lgpassword".into(), "x+y z".into())
            ])
        );
    }
}
