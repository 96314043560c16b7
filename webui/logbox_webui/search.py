"""The search pages: the search form and results, one message, export and the query help."""

from __future__ import annotations

from typing import Any

from flask import Blueprint, redirect, render_template, url_for

from .auth import login_required

bp = Blueprint("search", __name__)


@bp.route("/")
@login_required
def index() -> Any:
    """GET /: the search page."""
    return redirect(url_for("search.search"))


@bp.route("/search")
@login_required
def search() -> Any:
    """GET /search: the search form (results: being built)."""
    return render_template("search/search.html")
