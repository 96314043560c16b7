"""placeholder"""

from flask import Blueprint

bp = Blueprint("search", __name__)
