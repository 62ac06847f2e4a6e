"""Optional login: accounts from a users file, hashed passwords, read-only accounts.

    mqconsole -n 127.0.0.1:9876 --users conf/console-users.txt
    mqconsole --hash-password alice admin >> conf/console-users.txt     # asks for the password

The users file holds one account a line, `name:role:hash`, role `admin` (may change things) or
`read-only` (may look), hash as `--hash-password` writes it (PBKDF2-SHA256, salted); blank lines
and `#` comments are skipped. A browser logs in through /login (a session cookie, signed with a
key the process draws at start, valid 12 hours); a script may send HTTP Basic credentials.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
import time
from dataclasses import dataclass
from pathlib import Path

ROLES = ("admin", "read-only")
ITERATIONS = 240_000
SESSION_S = 12 * 3600


@dataclass(frozen=True)
class Account:
    name: str
    role: str
    password_hash: str

    @property
    def may_change(self) -> bool:
        return self.role == "admin"


def hash_password(password: str, *, iterations: int = ITERATIONS, salt: bytes | None = None) -> str:
    salt = salt or secrets.token_bytes(16)
    digest = hashlib.pbkdf2_hmac("sha256", password.encode(), salt, iterations)
    encoded = [base64.b64encode(x).decode() for x in (salt, digest)]
    return f"pbkdf2_sha256${iterations}${encoded[0]}${encoded[1]}"


def verify_password(password: str, encoded: str) -> bool:
    try:
        scheme, iterations, salt, digest = encoded.split("$")
        if scheme != "pbkdf2_sha256":
            return False
        again = hashlib.pbkdf2_hmac(
            "sha256", password.encode(), base64.b64decode(salt), int(iterations)
        )
        return hmac.compare_digest(again, base64.b64decode(digest))
    except ValueError:
        return False


def read_users(path: Path) -> dict[str, Account]:
    """The accounts of a users file; ValueError naming the line that is wrong."""
    accounts = {}
    for number, line in enumerate(path.read_text().splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        name, _, rest = line.partition(":")
        role, _, password_hash = rest.partition(":")
        if not name or role not in ROLES or not password_hash.startswith("pbkdf2_sha256$"):
            raise ValueError(
                f"{path}:{number}: expected name:role:hash with role one of {', '.join(ROLES)} "
                "and a hash from mqconsole --hash-password"
            )
        accounts[name] = Account(name, role, password_hash)
    if not accounts:
        raise ValueError(f"{path}: no account")
    return accounts


class Sessions:
    """Session tokens `name|expiry|signature`, signed with a key drawn at start: a restart
    logs everyone out, and nothing needs storing."""

    def __init__(self, accounts: dict[str, Account], lifetime_s: float = SESSION_S) -> None:
        self.accounts = accounts
        self.lifetime_s = lifetime_s
        self.key = secrets.token_bytes(32)
        self._basic: dict[str, str] = {}  # a verified Basic header's digest -> account name

    def _sign(self, text: str) -> str:
        return hmac.new(self.key, text.encode(), hashlib.sha256).hexdigest()

    def issue(self, name: str) -> str:
        text = f"{name}|{int(time.time() + self.lifetime_s)}"
        return f"{text}|{self._sign(text)}"

    def account(self, token: str) -> Account | None:
        text, _, signature = token.rpartition("|")
        name, _, expiry = text.partition("|")
        if not hmac.compare_digest(self._sign(text), signature):
            return None
        if not expiry.isdigit() or int(expiry) < time.time():
            return None
        return self.accounts.get(name)

    def login(self, name: str, password: str) -> Account | None:
        account = self.accounts.get(name)
        if account is None or not verify_password(password, account.password_hash):
            return None
        return account

    def basic(self, header: str) -> Account | None:
        """An `Authorization: Basic ...` header's account; a verified header is remembered
        (by its digest) so a script's requests do not each pay for the password hash."""
        digest = hashlib.sha256(header.encode()).hexdigest()
        if digest in self._basic:
            return self.accounts.get(self._basic[digest])
        try:
            name, _, password = (
                base64.b64decode(header.removeprefix("Basic ")).decode().partition(":")
            )
        except (ValueError, UnicodeDecodeError):
            return None
        account = self.login(name, password)
        if account is not None:
            self._basic[digest] = account.name
        return account
